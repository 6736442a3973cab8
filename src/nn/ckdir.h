// nn/ckdir: a training run's checkpoint directory across processes — the run is killed (SIGKILL: a spot
// instance reclaimed, a pod evicted, a Slurm requeue) and resumed, again and again, and the directory must stay
// bounded and clean whoever wrote what.
//   - One writer at a time: an flock on DIR/.dlperf-train.lock (the kernel drops it when the process dies, so a
//     killed writer never blocks the one that resumes it); a second live writer is refused.
//   - A complete checkpoint is the pair step-<N>.safetensors + step-<N>.state.safetensors; the model's rename
//     publishes the pair (nn/checkpoint.h), so a state file alone is an unpublished leftover.
//   - Retention keeps the newest N complete checkpoints in the directory, whoever wrote them (model first: a state
//     file without its model is never taken for complete).
//   - Cleaning removes what dead writers left: their temporary files (<name>.tmp.<pid>, from core/fs's atomic
//     writes) when that PID is no longer alive on this host or the file is not newer than the newest complete
//     checkpoint, and state files whose model never appeared; a replacing save's <stem>.state.safetensors.next
//     is finished or dropped (dlp_checkpoint_settle). Only names dlperf writes are touched.
// Defines: dlp_ckdir_lock, dlp_ckdir_unlock, dlp_ckdir_list, dlp_ckdir_clean, dlp_ckdir_retain, dlp_ckdir_path.
#ifndef DLP_NN_CKDIR_H
#define DLP_NN_CKDIR_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// Creates dir if needed and takes its writer lock (*fd: keep it open while writing; -1 on failure).
// DLP_ERR_EXISTS when another live process holds it (its PID is named).
dlp_status dlp_ckdir_lock(const char *dir, int *fd);
void dlp_ckdir_unlock(int fd);
// The steps of the complete checkpoints in dir, ascending (*steps malloc'ed, NULL when none; the caller frees).
// Returns how many (0 when dir is absent or unreadable).
int dlp_ckdir_list(const char *dir, int64_t **steps);
// "dir/step-00000050.safetensors"
void dlp_ckdir_path(const char *dir, int64_t step, char *out, size_t len);
// Removes dead writers' temporaries and unpublished state files; *removed counts them (may be NULL). Call it while
// holding the lock and not in the middle of a save.
dlp_status dlp_ckdir_clean(const char *dir, int *removed);
// Deletes all but the newest keep complete checkpoints (keep <= 0: none deleted); *removed counts checkpoints.
dlp_status dlp_ckdir_retain(const char *dir, int keep, int *removed);

#endif
