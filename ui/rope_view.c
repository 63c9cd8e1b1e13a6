/* rope_view.c - RoPE angles as text (rope_view.h). */
#include "rope_view.h"

#include <math.h>
#include <stdio.h>

#include "uline.h"

double rv_angle(float base, int32_t dim, int32_t pos, int32_t k) {
    double a = fmod((double)pos * pow((double)base, -2.0 * k / dim), 2 * M_PI);
    return a < 0 ? a + 2 * M_PI : a;
}

void rv_line(const char *who, float base, int32_t dim, int32_t pos, char *out, size_t cap, int width,
             bool utf8) {
    ui_line l = ui_line_make(out, cap, width, utf8);
    char buf[48];
    snprintf(buf, sizeof buf, "%s pos %d:", who, pos);
    ui_line_put(&l, buf);
    for (int32_t k = 0; k < RV_PAIRS && 2 * k < dim; k++) {
        snprintf(buf, sizeof buf, " %4.0f%s", rv_angle(base, dim, pos, k) * 180 / M_PI, utf8 ? "\u00b0" : "");
        ui_line_put(&l, buf);
    }
}

void rv_partners(const mask_view *v, int32_t r, int32_t *parent, int32_t *other) {
    *parent = *other = -1;
    const mv_row *row = &v->rows[r];
    for (int32_t o = 0; o < v->n_rows; o++) {
        const mv_row *x = &v->rows[o];
        if (o == r) continue;
        if (x->node == row->parent) *parent = o;
        /* a sibling (same parent) wins over a cousin at the same position */
        if (x->pos == row->pos && (*other < 0 || (x->parent == row->parent && v->rows[*other].parent != row->parent)))
            *other = o;
    }
}

bool rv_view_line(const mask_view *v, int32_t r, int i, char *out, size_t cap, int width, bool utf8) {
    if (r < 0 || r >= v->n_rows || v->rope_dim < 2 || i < 0 || i > 2) return false;
    const mv_row *row = &v->rows[r];
    int32_t parent, other, pos = row->pos;
    rv_partners(v, r, &parent, &other);
    char who[32];
    if (i == 0) snprintf(who, sizeof who, "row %d", r);
    else if (i == 1 && row->parent >= 0) {
        if (parent >= 0) snprintf(who, sizeof who, "parent (row %d)", parent), pos = v->rows[parent].pos;
        else snprintf(who, sizeof who, "parent"), pos = row->pos - 1;
    } else if (i == 2 && other >= 0) {
        bool sib = v->rows[other].parent == row->parent;
        snprintf(who, sizeof who, "%s (row %d)", sib ? "sibling" : "other branch", other);
        pos = v->rows[other].pos;
    } else return false;
    rv_line(who, v->rope_base, v->rope_dim, pos, out, cap, width, utf8);
    return true;
}
