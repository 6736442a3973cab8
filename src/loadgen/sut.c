// loadgen/sut: what every System Under Test shares — its teardown.
#include <string.h>

#include "loadgen/sut.h"

void dlp_lg_sut_destroy(dlp_lg_sut *sut) {
    if (!sut) return;
    if (sut->destroy && sut->ctx) sut->destroy(sut->ctx);
    memset(sut, 0, sizeof *sut);
}
