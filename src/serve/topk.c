// serve/topk: the JPEG signature check (the top-k of the logits is core/stats' dlp_stats_topk).
#include "serve/serve.h"

int dlp_serve_is_jpeg(const uint8_t *b, size_t len) { return len >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
