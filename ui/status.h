/* status.h - the status line's view model: what the engine is doing and how fast,
 * formatted to a width. Timing figures are written as "<number>ms" and "<number> tok/s"
 * so that screen captures can be compared after masking them. */
#ifndef MD_UI_STATUS_H
#define MD_UI_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ui_stats {
    const char *model;      /* base name of the model file */
    const char *backend;
    int32_t threads;
    int32_t nodes;          /* live nodes */
    int32_t kv_used, kv_slots;
    double step_ms;         /* last step */
    int32_t rows;           /* rows in the last step */
    double tok_s;           /* tokens computed per second over the running job */
    char job[64];           /* "idle", "grow 3/32", "cot 5/32 (paused)" */
    const char *mode;       /* how typed text goes in: "chat" (a user turn) or "raw";
                               NULL when the model has no chat template (always raw) */
} ui_stats;

/* The status line into out (cap bytes), at most width columns. */
void ui_status_format(const ui_stats *s, char *out, size_t cap, int width);

#endif
