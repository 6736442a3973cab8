// nn/safetensors: reading and writing the safetensors format (8-byte little-endian header length N, N bytes of
// JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the raw
// little-endian data; offsets are relative to the data, which the tensors cover without holes or overlaps).
// Everything in a file is validated on open; errors name the file and the tensor.
// Defines: dlp_st_dtype, dlp_st_tensor, dlp_st_file, dlp_st_open, dlp_st_close, dlp_st_find, dlp_st_meta,
//          dlp_st_read_f32, dlp_st_read_i64, dlp_st_writer, dlp_st_writer_*.
#ifndef DLP_NN_SAFETENSORS_H
#define DLP_NN_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum {
    DLP_ST_F64 = 0, DLP_ST_F32, DLP_ST_F16, DLP_ST_BF16, DLP_ST_I64, DLP_ST_I32, DLP_ST_I16, DLP_ST_I8, DLP_ST_U8,
    DLP_ST_BOOL, DLP_ST_DTYPE_COUNT
} dlp_st_dtype;

const char *dlp_st_dtype_name(dlp_st_dtype t);  // "F32", ...
size_t dlp_st_dtype_size(dlp_st_dtype t);

#define DLP_ST_MAX_DIMS 8
#define DLP_ST_MAX_HEADER_BYTES (100u << 20)

typedef struct dlp_st_tensor {
    char *name;
    dlp_st_dtype dtype;
    int ndim;
    int64_t shape[DLP_ST_MAX_DIMS];
    int64_t numel;
    const uint8_t *data;  // into the file's data section
    size_t nbytes;
} dlp_st_tensor;

typedef struct dlp_st_file {
    char path[1024];
    char *buf;               // the whole file
    size_t len;
    int ntensors;
    dlp_st_tensor *tensors;  // in file order of data_offsets
    int nmeta;
    char **meta_keys, **meta_vals;
} dlp_st_file;

// Reads and validates path (whole file in memory, at most max_bytes; 0: 16 GiB).
dlp_status dlp_st_open(const char *path, size_t max_bytes, dlp_st_file *f);
// Validates a file already in memory (buf is taken over: dlp_st_close frees it). `path` names it in errors.
dlp_status dlp_st_parse(const char *path, char *buf, size_t len, dlp_st_file *f);
void dlp_st_close(dlp_st_file *f);
const dlp_st_tensor *dlp_st_find(const dlp_st_file *f, const char *name);
const char *dlp_st_meta(const dlp_st_file *f, const char *key);  // NULL if absent
// Converts a floating tensor (F32, F16, BF16, F64) to fp32; out has t->numel elements.
dlp_status dlp_st_read_f32(const dlp_st_file *f, const dlp_st_tensor *t, float *out);
// Converts an integer tensor (I64, I32, I16, I8, U8, BOOL) to int64.
dlp_status dlp_st_read_i64(const dlp_st_file *f, const dlp_st_tensor *t, int64_t *out);

// Writer: tensors are added with borrowed data pointers (they must stay valid until dlp_st_writer_write), then
// written in the order added, with the header padded to a multiple of 8 bytes, atomically (core/fs).
typedef struct dlp_st_writer {
    int n, cap;
    struct dlp_st_entry *entries;
    int nmeta;
    char **meta_keys, **meta_vals;
} dlp_st_writer;

void dlp_st_writer_init(dlp_st_writer *w);
// Rejects duplicate names, empty names, ndim > 8 and negative dimensions.
dlp_status dlp_st_writer_add(dlp_st_writer *w, const char *name, dlp_st_dtype dtype, int ndim, const int64_t *shape,
                             const void *data);
dlp_status dlp_st_writer_meta(dlp_st_writer *w, const char *key, const char *value);
// flags: DLP_WRITE_REPLACE or DLP_WRITE_NOCLOBBER (core/fs.h).
dlp_status dlp_st_writer_write(const dlp_st_writer *w, const char *path, int flags);
void dlp_st_writer_free(dlp_st_writer *w);

#endif
