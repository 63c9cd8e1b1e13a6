/* test_tour.c - the guided tour (ui/tour.h, `multidecode tour`) and the RoPE view
 * (ui/rope_view.h) on stories260K:
 * - every step's screen names each of its rows with the token, RoPE position and KV slot
 *   the forest holds for the row's node (read from the forest, not the capture), and no
 *   row more; the fork's rows are siblings at one position, the grow step's their
 *   children one position further;
 * - the weights screen's rows sum to 1; the RoPE screen's angles are pos * base^(-2k/d);
 * - every screen fits 80 columns and says which of how many it is;
 * - `tour` without a terminal prints every screen; without -m it is a usage error;
 * - rv_angle and the mask pane's rotation lines against theta_k computed here. */
#include <math.h>

#include "forest/forest.h"
#include "t.h"
#include "t_model.h"
#include "t_run.h"
#include "../ui/forest_view.h"
#include "../ui/rope_view.h"
#include "../ui/tour.h"

#define PROMPT "Once upon a time"

/* The angle (radians, in [0, 2 pi)) of pair k at position pos, computed here. */
static double angle(double base, int dim, int pos, int k) {
    double a = fmod(pos * pow(base, -2.0 * k / dim), 2 * M_PI);
    return a < 0 ? a + 2 * M_PI : a;
}

/* Step s's screen names each row as the forest has it, and no row past the last. */
static void check_step_screen(const tour *t, const tok *tk, int32_t s) {
    const char *scr = tour_screen(t, s + 1);
    const mask_view *v = tour_step(t, s);
    const forest *f = tour_forest(t);
    int32_t bad = 0;
    char want[160];
    for (int32_t r = 0; r < v->n_rows; r++) {
        const forest_node *nd = forest_get(f, v->rows[r].id);
        char text[40];
        if (!nd) {
            bad++;
            continue;
        }
        fv_token_text(f, tk, forest_index(v->rows[r].id), text, sizeof text);
        snprintf(want, sizeof want, "row %d: \"%s\"  pos %d  slot %d", r, text, nd->depth, nd->kv_slot);
        if (!strstr(scr, want)) {
            bad++;
            T_CHECK(0, "step %d's screen lacks '%s':\n%s", s, want, scr);
        }
    }
    snprintf(want, sizeof want, "row %d: ", v->n_rows);
    T_CHECK(bad == 0 && v->n_rows > 0 && !strstr(scr, want), "step %d: %d rows named as the forest holds them",
            s, v->n_rows);
}

/* The fork's two rows are siblings under the prompt's last token, at its position + 1,
 * in two slots; the grow step's rows are their children, one position further. */
static void check_shape(const tour *t) {
    const forest *f = tour_forest(t);
    const mask_view *p = tour_step(t, 0), *k = tour_step(t, 1), *g = tour_step(t, 2);
    const forest_node *a = forest_get(f, k->rows[0].id), *b = forest_get(f, k->rows[1].id);
    const forest_node *c = forest_get(f, g->rows[0].id), *d = forest_get(f, g->rows[1].id);
    T_CHECK(a && b && c && d && k->n_rows == 2 && g->n_rows == 2, "two rows in the fork and the grow step");
    if (!a || !b || !c || !d) return;
    T_CHECK(a->parent == b->parent && a->parent == p->rows[p->n_rows - 1].node && a->depth == p->n_rows &&
                b->depth == a->depth && a->kv_slot != b->kv_slot && a->token != b->token,
            "fork: siblings at pos %d in slots %d and %d", a->depth, a->kv_slot, b->kv_slot);
    T_CHECK(c->parent == k->rows[0].node && d->parent == k->rows[1].node && c->depth == a->depth + 1,
            "grow: each fork's child, at pos %d", c->depth);
}

/* The weights screen: one "(sum X)" per row of the grow step, each within 0.01 of 1. */
static void check_weights_screen(const tour *t) {
    const char *scr = tour_screen(t, 4), *at = scr;
    int32_t n = 0, bad = 0;
    while ((at = strstr(at, "(sum "))) {
        bad += fabs(atof(at + 5) - 1) > 0.01;
        n++, at++;
    }
    T_CHECK(n == tour_step(t, 2)->n_rows && bad == 0, "weights screen: %d row sums, %d off 1", n, bad);
}

/* The RoPE screen's line for the grow step's row 0: its angles are pos * theta_k. */
static void check_rope_screen(const tour *t) {
    const mask_view *v = tour_step(t, 2);
    char key[32];
    snprintf(key, sizeof key, "row 0 pos %d:", v->rows[0].pos);
    const char *at = strstr(tour_screen(t, 5), key);
    double worst = at ? 0 : 999;
    int k = 0;
    for (const char *s = at ? at + strlen(key) : ""; k < RV_PAIRS; k++) {
        char *end;
        double deg = strtod(s, &end);
        if (end == s) break;
        double want = angle(v->rope_base, v->rope_dim, v->rows[0].pos, k) * 180 / M_PI;
        double diff = fabs(deg - want);
        worst = fmax(worst, fmin(diff, 360 - diff)); /* 359.6 rounds to 360 */
        s = end;
    }
    T_CHECK(at && k == RV_PAIRS && worst <= 0.5, "RoPE screen: %d angles within %g degree of pos x theta_k", k, worst);
}

/* Every screen fits 80 columns and names itself "The tour, i of N". */
static void check_frames(const tour *t) {
    int32_t n = tour_n_screens(t), bad = 0;
    for (int32_t i = 0; i < n; i++) {
        char title[40];
        snprintf(title, sizeof title, "The tour, %d of %d", i + 1, n);
        const char *s = tour_screen(t, i);
        bad += strncmp(s, title, strlen(title)) != 0;
        for (const char *l = s; *l;) {
            size_t len = strcspn(l, "\n");
            bad += len > 80, l += len + (l[len] == '\n');
        }
    }
    T_CHECK(n >= 6 && bad == 0 && !tour_screen(t, n), "%d screens, titled, within 80 columns (%d off)", n, bad);
}

static void test_tour(void) {
    model *m;
    tok *tk;
    if (!t_stories(&m, &tk)) return;
    model_ctx *c = t_new_ctx(m, 256);
    st_err err = {0};
    tour *t = c ? tour_build(c, tk, PROMPT, &err) : NULL;
    T_CHECK(t != NULL, "tour: %s", err.msg);
    if (t) {
        for (int32_t s = 0; s < TOUR_STEPS; s++) check_step_screen(t, tk, s);
        check_shape(t);
        check_weights_screen(t);
        check_rope_screen(t);
        check_frames(t);
    }
    tour_free(t);
    char *big = malloc(2001);
    for (int i = 0; big && i < 2000; i++) big[i] = i % 2 ? ' ' : 'a';
    if (big) big[2000] = 0;
    T_CHECK(big && !tour_build(c, tk, big, &err) && err.code == ST_ERR_ARG, "a prompt the cache cannot hold: %s",
            err.msg);
    free(big);
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* The rotation lines of the mask pane: row, parent, another branch's row at its position. */
static void test_rope_view(void) {
    T_CHECK(fabs(rv_angle(10000, 64, 7, 0) - 7 + 2 * M_PI) < 1e-9 &&
                fabs(rv_angle(500000, 64, 1000, 5) - angle(500000, 64, 1000, 5)) < 1e-9,
            "rv_angle: pos x base^(-2k/d), mod 2 pi");
    mask_view *v = malloc(sizeof *v);
    mv_init(v);
    v->step = 0, v->n_rows = 3, v->rope_base = 10000, v->rope_dim = 8;
    v->rows[0] = (mv_row){.node = 4, .parent = 3, .pos = 4};
    v->rows[1] = (mv_row){.node = 5, .parent = 4, .pos = 5}; /* row 0's child */
    v->rows[2] = (mv_row){.node = 9, .parent = 4, .pos = 5}; /* its sibling */
    char line[128], want[128];
    bool ok = rv_view_line(v, 1, 0, line, sizeof line, 100, false);
    snprintf(want, sizeof want, "row 1 pos 5: %4.0f %4.0f %4.0f %4.0f", angle(1e4, 8, 5, 0) * 180 / M_PI,
             angle(1e4, 8, 5, 1) * 180 / M_PI, angle(1e4, 8, 5, 2) * 180 / M_PI, angle(1e4, 8, 5, 3) * 180 / M_PI);
    T_CHECK(ok && !strcmp(line, want), "row line '%s' (want '%s')", line, want);
    ok = rv_view_line(v, 1, 1, line, sizeof line, 100, false);
    T_CHECK(ok && strstr(line, "parent (row 0) pos 4:"), "parent line: %s", line);
    ok = rv_view_line(v, 1, 2, line, sizeof line, 100, false);
    T_CHECK(ok && strstr(line, "sibling (row 2) pos 5:") && !strcmp(strchr(line, ':'), strchr(want, ':')),
            "sibling line turns alike: %s", line);
    T_CHECK(!rv_view_line(v, 0, 2, line, sizeof line, 100, false), "row 0 has no other row at pos 4");
    v->rope_dim = 0;
    T_CHECK(!rv_view_line(v, 1, 0, line, sizeof line, 100, false), "no lines without a RoPE base");
    free(v);
}

static void test_cli(void) {
    char bin[512], model_path[4096];
    if (!t_cli_setup(bin, sizeof bin, model_path, sizeof model_path)) return;
    int st;
    char *out = t_runf(&st, "%s tour -m %s -p '" PROMPT "' </dev/null", bin, model_path);
    int32_t n = 0;
    for (const char *s = out; (s = strstr(s, "The tour, ")); s++) n++;
    T_CHECK(st == 0 && n == 7 && strstr(out, "The tour, 7 of 7") && strstr(out, "pos = RoPE position = depth"),
            "tour without a terminal: %d screens\n%.400s", n, out);
    /* the fork's two rows: one position, two slots */
    int p0 = -1, s0 = -1, p1 = -2, s1 = -1;
    const char *fk = strstr(out, "step 1, a fork");
    const char *a = fk ? strstr(fk, "  row 0: ") : NULL, *b = fk ? strstr(fk, "  row 1: ") : NULL;
    bool ok = a && b && sscanf(strstr(a, "pos"), "pos %d  slot %d", &p0, &s0) == 2 &&
              sscanf(strstr(b, "pos"), "pos %d  slot %d", &p1, &s1) == 2;
    T_CHECK(ok && p0 == p1 && s0 != s1, "fork rows 0 and 1: pos %d / %d, slots %d / %d", p0, p1, s0, s1);
    free(out);
    out = t_runf(&st, "%s tour 2>&1", bin);
    T_CHECK(st == 2 && strstr(out, "-m MODEL"), "tour without a model: %d %s", st, out);
    free(out);
}

int main(void) {
    test_rope_view();
    test_tour();
    test_cli();
    return t_done();
}
