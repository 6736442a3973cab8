// perf/validate_sweep: `dlperf validate`'s sweep: its configurations (a file, or the built-in sweep on the backends
// this build has), the machine (a profile, or a quick probe first), the dataset and its statistics, each
// configuration run and measured (perf/validate), and the summary: MAPE overall and on the machine as probed,
// regime agreement, scale-out pairs, and the result's JSON.
// Defines: dlp_validate_sweep_req, dlp_validate_sweep, dlp_validate_sweep_open, dlp_validate_sweep_run,
//          dlp_validate_sweep_summarize, dlp_validate_sweep_json, dlp_validate_sweep_free.
#ifndef DLP_PERF_VALIDATE_SWEEP_H
#define DLP_PERF_VALIDATE_SWEEP_H
#include "perf/validate.h"

typedef struct dlp_validate_sweep_req {
    const char *configs_path;  // a JSON list of configurations (NULL: the built-in sweep)
    int quick;                 // the built-in sweep's short version, and a quick probe
    const char *data;          // the training set every run reads
    const char *catalog_dir;   // for sim:<gpu> devices (NULL: found, or none)
    const char *profile_path;  // NULL: probe first
    const char *save_profile;  // when probing first, keep the profile here (NULL: not kept)
    const char *also_profile_path;  // every run predicted from this profile too (NULL: none)
    int steps, retries;
    double seconds, max_seconds;
    uint64_t seed;
    void (*progress)(void *ctx, const char *line);  // messages for humans (what is left out, probing)
    void *ctx;
} dlp_validate_sweep_req;

typedef struct dlp_validate_sweep {
    dlp_validate_config *cfgs;
    dlp_validate_row *rows;
    double *ape;  // per row (NAN: failed)
    int n;
    dlp_profile *prof;
    dlp_dataset_stats *stats;
    dlp_dataset *ds;
    dlp_catalog *cat;
    json_t *probe_details;  // the probe's details when it probed first
    char where[4096];       // the dataset as opened
    dlp_validate_cfg vc;
    // dlp_validate_sweep_summarize:
    int nok, agree, nfinite, nprobed, busy;
    double mape, mape_probed, seconds;
    double mape_at_speed;      // each run against the prediction at the speed it saw (NAN: no speed known)
    int nspeed;                // runs behind it
    double mape_at_share;      // each run against the prediction at the CPU share it saw (NAN: none known)
    double mape_at_mean_share; // the same with the multi-thread compute rows by the mean share (the model before)
    int nshare;                // runs behind it
    double share_min, share_max;  // the runs' CPU shares
    double steal_mean;         // the runs' mean steal fraction (NAN: unknown)
    double speed_min, speed_max;  // the runs' speeds over the profile's reference
    dlp_validate_scaling sc[DLP_VALIDATE_MAX_CONFIGS];
    int nsc;
    // --also-profile: the same runs predicted from a second profile (at its probed speed and at each run's speed,
    // the run's canary reading brought to that profile's reference); NULL prof2: none
    dlp_profile *prof2;
    double *pred2, *pred2_speed, *pred2_share, *pred2_mean_share;  // per row (NAN: failed or unknown)
    double mape2, mape2_speed, mape2_share, mape2_mean_share;
    int n2, n2_speed, n2_share;
} dlp_validate_sweep;

// Loads the configurations, the catalog, the dataset and its statistics and the machine, and resolves the balanced
// configurations' devices. Free with dlp_validate_sweep_free, also after an error.
dlp_status dlp_validate_sweep_open(const dlp_validate_sweep_req *req, dlp_validate_sweep *sw);
// Runs and measures configuration i into sw->rows[i] (a failure is recorded in the row; the sweep goes on).
void dlp_validate_sweep_run(dlp_validate_sweep *sw, int i);
// The summary of the rows run (seconds: the sweep's wall time).
void dlp_validate_sweep_summarize(dlp_validate_sweep *sw, double seconds);
// Adds the sweep's fields of dlperf.validate/1 to res (profile_label: the profile's path or how it was made).
void dlp_validate_sweep_json(const dlp_validate_sweep *sw, const char *profile_label, json_t *res);
void dlp_validate_sweep_free(dlp_validate_sweep *sw);

#endif
