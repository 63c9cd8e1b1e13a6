/* window.c - the words for a model's sliding window (model.h's model_window_text), shared
 * by the views that teach it (the mask pane, `plan`) and `info`. */
#include "model/model.h"

#include <stdio.h>

/* Appends the layers l < n_layer that are local (want) or global to out as ranges
 * ("0-4,6"). */
static int put_layers(const model_hparams *hp, bool want, char *out, size_t cap, int n) {
    bool first = true;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if (model_layer_is_swa(hp, l) != want || (l > 0 && model_layer_is_swa(hp, l - 1) == want))
            continue;
        int32_t e = l;
        while (e + 1 < hp->n_layer && model_layer_is_swa(hp, e + 1) == want) e++;
        size_t at = (size_t)n < cap ? (size_t)n : cap;
        n += e > l ? snprintf(out + at, cap - at, "%s%d-%d", first ? "" : ",", l, e)
                   : snprintf(out + at, cap - at, "%s%d", first ? "" : ",", l);
        first = false;
    }
    return n;
}

int model_window_text(const model_hparams *hp, char *out, size_t cap) {
    if (cap) out[0] = '\0';
    if (hp->n_swa <= 0) return 0;
    int32_t global = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) global += !model_layer_is_swa(hp, l);
    int n = snprintf(out, cap, "window %d on layer%s ", hp->n_swa,
                     hp->n_layer - global > 1 ? "s" : "");
    n = put_layers(hp, true, out, cap, n);
    if (global == 0) return n;
    size_t at = (size_t)n < cap ? (size_t)n : cap;
    n += snprintf(out + at, cap - at, "; layer%s ", global > 1 ? "s" : "");
    n = put_layers(hp, false, out, cap, n);
    at = (size_t)n < cap ? (size_t)n : cap;
    return n + snprintf(out + at, cap - at, " global");
}
