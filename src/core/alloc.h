// core/alloc: aligned allocation and an allocator hook (so a GPU backend can hand out pinned memory).
// Defines: dlp_allocator, dlp_allocator_default, dlp_alloc_aligned, dlp_free_aligned, dlp_free_all
//          (DLP_FREE_ALL), dlp_free_strings, dlp_xcalloc.
#ifndef DLP_CORE_ALLOC_H
#define DLP_CORE_ALLOC_H
#include <stddef.h>

#define DLP_ALIGN 64

typedef struct dlp_allocator {
    const char *name;
    void *(*alloc)(void *ctx, size_t bytes);  // returns DLP_ALIGN-aligned memory or NULL
    void (*free)(void *ctx, void *p);
    void *ctx;
} dlp_allocator;

const dlp_allocator *dlp_allocator_default(void);  // posix_memalign/free
void *dlp_alloc_aligned(size_t bytes);             // zeroed, DLP_ALIGN-aligned; NULL on failure
void dlp_free_aligned(void *p);

// Frees each of n pointers (malloc'd or NULL): a destructor's list of members in one line, through DLP_FREE_ALL.
void dlp_free_all(void *const *ptrs, size_t n);
#define DLP_FREE_ALL(...) dlp_free_all((void *const[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))
// Frees n strings and the array that holds them (NULL: nothing).
void dlp_free_strings(char **v, int n);

#endif
