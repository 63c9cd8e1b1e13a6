/* status.c - the status line (status.h). */
#include "status.h"

#include <stdio.h>
#include <string.h>

#include "uline.h"

enum { F_MODEL, F_MODE, F_BACKEND, F_JOB, F_NODES, F_KV, F_STEP, F_SPEED, F_N };

/* The order fields go in when the line is too narrow: the model first (the title bar names
 * it too), the job never. */
static const int drop_order[F_N - 1] = {F_MODEL, F_BACKEND, F_STEP, F_SPEED, F_NODES, F_MODE, F_KV};

/* The columns a field's text takes (the status line is ASCII but for the model's name). */
static int cols_of(const char *s) {
    char tmp[512];
    ui_line l = ui_line_make(tmp, sizeof tmp, 1 << 20, false);
    ui_line_put(&l, s);
    return l.cols;
}

void ui_status_format(const ui_stats *s, char *out, size_t cap, int width) {
    char f[F_N][160];
    /* the timing fields are measured at a fixed width, so which fields fit never depends
     * on how fast the last step was (screen captures stay comparable) */
    int w_fixed[F_N] = {0};
    snprintf(f[F_MODEL], sizeof f[0], "%s", s->model ? s->model : "?");
    snprintf(f[F_MODE], sizeof f[0], "%s%s", s->mode ? "typing: " : "", s->mode ? s->mode : "");
    snprintf(f[F_BACKEND], sizeof f[0], "%s %d thr", s->backend ? s->backend : "cpu", s->threads);
    snprintf(f[F_JOB], sizeof f[0], "%s", s->job);
    snprintf(f[F_NODES], sizeof f[0], "%d nodes", s->nodes);
    snprintf(f[F_KV], sizeof f[0], "KV %d used %d free", s->kv_used, s->kv_slots - s->kv_used);
    snprintf(f[F_STEP], sizeof f[0], "%d rows %.1fms", s->rows, s->step_ms);
    snprintf(f[F_SPEED], sizeof f[0], "%.1f tok/s", s->tok_s);
    char probe[64];
    w_fixed[F_STEP] = snprintf(probe, sizeof probe, "%d rows 9999.9ms", s->rows);
    w_fixed[F_SPEED] = (int)strlen("99999.9 tok/s");
    bool on[F_N];
    int total = 1 - 3; /* the leading space; no separator before the first field */
    for (int i = 0; i < F_N; i++) {
        on[i] = f[i][0] != '\0';
        if (on[i]) total += 3 + (w_fixed[i] ? w_fixed[i] : cols_of(f[i]));
    }
    /* too wide: the KV field short, then whole fields dropped, least needed first */
    if (total > width) {
        int before = cols_of(f[F_KV]);
        snprintf(f[F_KV], sizeof f[0], "KV %d/%d", s->kv_used, s->kv_slots);
        total -= before - cols_of(f[F_KV]);
    }
    for (int k = 0; k < F_N - 1 && total > width; k++) {
        int i = drop_order[k];
        if (on[i]) on[i] = false, total -= 3 + (w_fixed[i] ? w_fixed[i] : cols_of(f[i]));
    }
    ui_line l = ui_line_make(out, cap, width, false);
    ui_line_put(&l, " ");
    bool first = true;
    for (int i = 0; i < F_N; i++) {
        if (!on[i]) continue;
        if (!first) ui_line_put(&l, " | ");
        ui_line_put(&l, f[i]);
        first = false;
    }
    ui_line_pad(&l);
}
