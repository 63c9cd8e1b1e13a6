/* test_teach.c - the teaching views: the mask pane's step history (ui/mask_history.h),
 * its folds of a long shared prompt (o opens them, h / l scroll),
 * and attention weights (ui/mask_view.h, ui/svg.h and `plan --attn`) on stories260K:
 * - the mask view keeps a step's weights: every row's drawn cells sum to 1 (runs of slots
 *   summed, when the grid is too narrow for one column a slot), only seen cells have one,
 *   and a seen cell is drawn as a bar (a digit without UTF-8);
 * - the SVG shades exactly the seen cells, each row's data-w summing to 1, with a key;
 * - `plan --attn L[:H]`: JSON weights one per slot of each row's mask list, summing to 1,
 *   for the layer and head asked (grow steps and speculative ones); digits in the text
 *   grid; a bad layer is refused;
 * - `plan -k 3 --temp 0` forks three distinct tokens;
 * - RoPE in the SVG: a ruler of positions, and dials of a row, a row of another branch at
 *   its position (the same angles) and its parent (one step less);
 * - a slide (plan --slide) keeps the layout rules: 16:9, text inside the view box and token
 *   labels inside their boxes, no colour shared by two radix lines, the prompt folded. */
#include <jansson.h>

#include "convert/mkmodel.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "t.h"
#include "t_model.h"
#include "t_run.h"
#include "../ui/mask_history.h"
#include "../ui/mask_view.h"
#include "../ui/svg.h"

/* A prompt and three forks of two tokens under it, prefilled, then a token under each
 * fork: the second step, run with the weights of layer 2's mean, into v. */
static bool weighted_step(model *m, tok *tk, mask_view *v) {
    model_ctx *c = t_new_ctx(m, 256);
    forest *f = forest_init(256, 0);
    step_plan p;
    step_plan_init(&p);
    p.attn_want = true, p.attn_layer = 2, p.attn_head = -1;
    int32_t toks[5] = {1, 403, 407, 261, 378};
    forest_id end;
    st_err err = {0};
    bool ok = c && forest_add_root(f, toks, NULL, 5, 0, &end, &err) == ST_OK;
    forest_id leaf[3];
    for (int32_t b = 0; ok && b < 3; b++) {
        int32_t t[2] = {300 + b, 310 + b};
        ok = forest_append(f, end, t, NULL, 2, &leaf[b], &err) == ST_OK;
    }
    ok = ok && step_forest(f, &p, c, &err) == ST_OK; /* the prefill, then one token a branch */
    for (int32_t b = 0; ok && b < 3; b++) {
        int32_t t = 320 + b;
        ok = forest_append(f, leaf[b], &t, NULL, 1, NULL, &err) == ST_OK;
    }
    ok = ok && step_forest(f, &p, c, &err) == ST_OK;
    T_CHECK(ok, "step: %s", err.msg);
    if (ok) mv_capture(v, f, tk, &p, 0);
    char buf[16 * 1024];
    FILE *fp = ok ? fmemopen(buf, sizeof buf, "w") : NULL;
    if (fp) { /* the picture, from the same capture */
        T_CHECK(svg_write(fp, f, tk, v, SVG_MASK, &err) == ST_OK, "svg: %s", err.msg);
        fclose(fp);
        buf[sizeof buf - 1] = 0;
        int32_t on = 0, shaded = 0;
        double worst = 0, sum = 0;
        int y = -1;
        for (const char *s = buf; (s = strstr(s, "<rect class=\"")); s++) {
            int ry = 0;
            const char *yy = strstr(s, " y=\""), *w = strstr(s, "data-w=\""), *end2 = strchr(s, '>');
            if (!strncmp(s + 13, "key", 3)) continue;
            sscanf(yy, " y=\"%d\"", &ry);
            if (ry != y && y >= 0) worst = fmax(worst, fabs(sum - 1)), sum = 0;
            y = ry;
            on += !strncmp(s + 13, "on\"", 3);
            if (w && w < end2) shaded++, sum += atof(w + 8);
        }
        worst = fmax(worst, fabs(sum - 1));
        T_CHECK(on > 0 && shaded == on && worst < 2e-3 && strstr(buf, "class=\"key\"") &&
                strstr(buf, "layer 2, mean of heads"),
                "svg: %d seen cells, %d shaded, rows sum within %g of 1, with a key", on, shaded, worst);
    }
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    return ok;
}

/* Each row's drawn cells in the layout for width columns: weights only where seen,
 * summing to 1. */
static void check_view_rows(mask_view *v, int32_t width) {
    mv_layout(v, width);
    int32_t bad = 0, bars = 0;
    double worst = 0;
    for (int32_t r = 0; r < v->n_rows; r++) {
        double sum = 0;
        for (int32_t d = 0; d < v->n_dcols; d++) {
            float w = mv_weight(v, r, d);
            char g[8];
            mv_cell_glyph(v, r, d, true, g);
            bool seen = mv_cell(v, r, d) == '#';
            bad += seen != (w >= 0);
            bars += seen && !strncmp(g, "\xe2\x96", 2); /* U+2581..U+2588 */
            if (w >= 0) sum += w;
        }
        worst = fmax(worst, fabs(sum - 1));
    }
    T_CHECK(v->attn_layer == 2 && bad == 0 && bars > 0 && worst < 2e-3,
            "mask view, width %d (%s): %d cells off the mask, %d bars, rows sum within %g of 1",
            width, v->runs ? "runs" : "a column a slot", bad, bars, worst);
    char line[256];
    mv_header(v, line, sizeof line, 200, true);
    T_CHECK(strstr(line, "attention weights: layer 2, mean of heads") != NULL, "header: %s", line);
    mv_legend(v, line, sizeof line, 100, true);
    T_CHECK(strstr(line, "pos = RoPE position = depth in the tree") != NULL, "a wide legend says what pos is: %s", line);
}

/* Long prompts fold: at a width the plain grid overflows, the shared prompt's slots are one
 * column while each row's own slots stay one a column; narrower, every run folds; o opens
 * the folds (one column a slot) and h / l then scroll. */
static void test_fold(mask_view *v) {
    mv_layout(v, 1000);
    int32_t plain = v->n_dcols, first_n = 0, own = 0;
    mv_layout(v, plain - 1);
    first_n = v->dcols[0].n;
    for (int32_t d = 1; d < v->n_dcols; d++) own += v->dcols[d].n == 1;
    int32_t gaps = 0, shared = v->n_dcols;
    for (int32_t d = 1; d < v->n_dcols; d++) gaps += v->dcols[d].n == 0;
    T_CHECK(v->level == 1 && first_n == 5 && own == 9 && own + gaps + 1 == v->n_dcols,
            "shared folded: the prompt one column of %d slots, then %d columns of one slot (the rows' own "
            "3 each) and %d gaps", first_n, own, gaps);
    mv_layout(v, shared - 1);
    T_CHECK(v->level == 2 && v->n_dcols < shared, "narrower: every run folded, %d columns", v->n_dcols);
    T_CHECK(mv_toggle_fold(v), "o opens");
    mv_layout(v, 4);
    int32_t follow = mv_first_col(v, 4);
    mv_hscroll(v, -4, 4);
    T_CHECK(v->n_dcols == plain && !v->runs && follow == plain - 4 && mv_first_col(v, 4) == plain - 8,
            "open: %d columns of %d, h scrolls from %d to %d", v->n_dcols, plain, follow, mv_first_col(v, 8));
    T_CHECK(!mv_toggle_fold(v), "o folds again");
}

static void test_view(void) {
    model *m;
    tok *tk;
    if (!t_stories(&m, &tk)) return;
    mask_view *v = malloc(sizeof *v);
    mv_init(v);
    if (weighted_step(m, tk, v)) {
        check_view_rows(v, 1000);
        check_view_rows(v, 6);
        T_CHECK(v->runs, "a narrow grid merges runs");
        test_fold(v);
        char g[8];
        for (int32_t d = 0; d < v->n_dcols; d++)
            if (mv_weight(v, 0, d) >= 0) {
                mv_cell_glyph(v, 0, d, false, g);
                T_CHECK((g[0] >= '0' && g[0] <= '9') || g[0] == '#', "ASCII: a digit (%s)", g);
                break;
            }
    }
    free(v);
    tok_free(tk);
    model_free(m);
}

/* Row weights of step s of a plan --json document, each checked against its mask row. */
static void check_plan_json(const char *out, int32_t layer, int head) {
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je), *steps = json_object_get(doc, "steps");
    int32_t rows = 0, bad = 0;
    double worst = 0;
    for (size_t s = 0; s < json_array_size(steps); s++) {
        json_t *st = json_array_get(steps, s), *a = json_object_get(st, "attention");
        json_t *mask = json_object_get(st, "mask"), *w = json_object_get(a, "weights");
        bad += json_integer_value(json_object_get(a, "layer")) != layer ||
               (head < 0 ? !json_is_null(json_object_get(a, "head"))
                         : json_integer_value(json_object_get(a, "head")) != head);
        for (size_t r = 0; r < json_array_size(mask); r++, rows++) {
            json_t *wr = json_array_get(w, r);
            bad += json_array_size(wr) != json_array_size(json_array_get(mask, r));
            double sum = 0;
            for (size_t i = 0; i < json_array_size(wr); i++) sum += json_real_value(json_array_get(wr, i));
            worst = fmax(worst, fabs(sum - 1));
        }
    }
    T_CHECK(doc && rows > 3 && bad == 0 && worst < 1e-5, "plan --attn %d:%d --json: %d rows, %d off, "
            "sums within %g of 1", layer, head, rows, bad, worst);
    json_decref(doc);
}

/* The angle (degrees) of the dial of pair k at position pos in svg, -1 when absent. */
static double dial_angle(const char *svg, int pos, int k) {
    char key[64];
    snprintf(key, sizeof key, "data-pos=\"%d\" data-pair=\"%d\" data-angle=\"", pos, k);
    const char *p = strstr(svg, key);
    return p ? atof(p + strlen(key)) : -1;
}

/* RoPE made visible: a ruler tick per position under the tree, and dials where a row at
 * position P and another branch's row at P turn alike while the parent turns one step
 * less (pair 0's step is 1 radian whatever the base). */
static void test_rope_svg(const char *bin, const char *model_path) {
    char path[] = "/tmp/md_test_teach_XXXXXX";
    int fd = mkstemp(path), st;
    if (fd >= 0) close(fd);
    char *out = t_runf(&st, "%s plan -m %s -p 'Once upon a time' -k 3 -s 4 --svg %s >/dev/null && cat %s",
                       bin, model_path, path, path);
    int ticks = 0;
    for (const char *p = out; (p = strstr(p, "class=\"tick\"")); p++) ticks++;
    /* 5 prompt tokens (BOS included) and 4 steps: positions 0..8 */
    double row = dial_angle(out, 7, 0), other = -1, parent = dial_angle(out, 6, 0);
    const char *second = strstr(out, "data-pos=\"7\" data-pair=\"0\"");
    if (second && (second = strstr(second + 1, "data-pos=\"7\" data-pair=\"0\""))) other = dial_angle(second, 7, 0);
    double step = fmod(row - parent + 720, 360);
    T_CHECK(st == 0 && ticks == 9 && strstr(out, "pos = RoPE position = depth") && row >= 0 &&
            other == row && fabs(step - 180 / M_PI) < 0.01,
            "svg: %d ruler ticks, pair 0 at pos 7 %.3f and %.3f (other branch), at pos 6 %.3f", ticks,
            row, other, parent);
    free(out);
    unlink(path);
}

/* Attribute name's number in the tag that starts at tag (-1e9 when absent). */
static double attr_num(const char *tag, const char *name) {
    char key[32];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *end = strchr(tag, '>'), *p = strstr(tag, key);
    return p && p < end ? atof(p + strlen(key)) : -1e9;
}

/* The layout rules of a slide: 16:9 at 1920 x 1080; every unrotated text inside the view
 * box (0.62 em a character); every token label inside its box; no two radix lines of the
 * same colour; the long prompt folded into one box whose label says it is cut. */
static void check_slide(const char *svg) {
    double vw = 0, vh = 0;
    const char *vb = strstr(svg, "viewBox=\"0 0 ");
    if (vb) sscanf(vb, "viewBox=\"0 0 %lf %lf", &vw, &vh);
    T_CHECK(strstr(svg, "width=\"1920\" height=\"1080\"") && vw > 0 && fabs(vw * 9 - vh * 16) <= 16,
            "16:9: view box %g x %g", vw, vh);
    int texts = 0, outside = 0, clipped = 0, boxes = 0;
    for (const char *p = svg; (p = strstr(p, "<text ")); p++) {
        if (strstr(p, "transform=") && strstr(p, "transform=") < strchr(p, '>')) continue; /* rotated */
        double x = attr_num(p, "x"), y = attr_num(p, "y"), size = attr_num(p, "font-size");
        const char *a = strstr(p, "text-anchor=\""), *body = strchr(p, '>') + 1, *end = strstr(body, "</text>");
        int n = 0;
        for (const char *c = body; c < end; c++) { /* characters, an entity (&quot;) one */
            n += (*c & 0xC0) != 0x80;
            if (*c == '&' && strchr(c, ';') && strchr(c, ';') < end) c = strchr(c, ';');
        }
        double w = n * size * 0.62, x0 = !strncmp(a + 13, "end", 3) ? x - w : !strncmp(a + 13, "middle", 6) ? x - w / 2 : x;
        outside += x0 < 0 || x0 + w > vw || y - size < 0 || y > vh;
        texts++;
        const char *cls = strstr(p, "class=\"");
        if (cls && cls < body && (!strncmp(cls + 7, "token\"", 6) || !strncmp(cls + 7, "where\"", 6))) {
            /* a box's label: its box is the rect before */
            const char *r = p;
            while (r > svg && strncmp(r, "<rect ", 6)) r--;
            clipped += w > attr_num(r, "width") - 8;
            boxes++;
        }
    }
    T_CHECK(texts > 20 && outside == 0 && boxes > 16 && clipped == 0,
            "%d texts, %d outside the view box; %d box labels, %d wider than their box", texts, outside, boxes, clipped);
    /* the mask's columns are named by their tokens: the prompt's run "the prompt", no slot numbers */
    int named = 0, numbered = 0, prompt = 0;
    for (const char *p = svg; (p = strstr(p, "<text class=\"slot\"")); p++) {
        const char *body = strchr(p, '>') + 1;
        int a, b;
        numbered += sscanf(body, "%d-%d<", &a, &b) == 2 || sscanf(body, "%d<", &a) == 1;
        prompt += !strncmp(body, "the prompt<", 11);
        named++;
    }
    T_CHECK(named > 8 && numbered == 0 && prompt == 1, "slide mask columns: %d named, %d by slot number, %d 'the prompt'",
            named, numbered, prompt);
    char colour[64][40] = {{0}};
    int lines = 0, same = 0;
    for (const char *p = svg; (p = strstr(p, "data-line=\"")); p++) {
        int line = atoi(p + 11);
        const char *st = strstr(p, "stroke=\"");
        char c[40] = "";
        if (st) sscanf(st + 8, "%39[^\"]", c);
        if (line < 0 || line >= 64) continue;
        if (!colour[line][0]) {
            for (int k = 0; k < 64; k++) same += colour[k][0] && !strcmp(colour[k], c);
            snprintf(colour[line], sizeof colour[line], "%s", c);
            lines++;
        }
    }
    const char *fold = strstr(svg, "class=\"fold\"");
    const char *ftext = fold ? strstr(fold, "class=\"token\"") : NULL;
    T_CHECK(lines > 6 && same == 0 && fold && ftext && strstr(ftext, "\u2026</text>") &&
                strstr(ftext, "\u2026</text>") < strstr(ftext, "</g>"),
            "%d radix lines, %d colours repeated; the prompt folded into one box, its label cut with an ellipsis",
            lines, same);
}

static void test_slide(const char *bin, const char *model_path) {
    char path[] = "/tmp/md_test_slide_XXXXXX";
    int fd = mkstemp(path), st;
    if (fd >= 0) close(fd);
    char *out = t_runf(&st, "%s plan -m %s -p 'Once upon a time there was a little girl named Lily who loved "
                       "to play' -k 8 -s 3 --attn 2 --slide %s >/dev/null && cat %s", bin, model_path, path, path);
    T_CHECK(st == 0, "plan --slide: %.200s", out);
    if (st == 0) check_slide(out);
    free(out);
    unlink(path);
}

static void test_plan_cli(void) {
    char bin[512], model_path[4096];
    if (!t_cli_setup(bin, sizeof bin, model_path, sizeof model_path)) return;
    int st;
    char *out = t_runf(&st, "%s plan -m %s -p 'Once upon a time' -k 2 -s 3 --attn 3:1 --json", bin, model_path);
    T_CHECK(st == 0, "plan --attn --json: %.300s", out);
    if (st == 0) check_plan_json(out, 3, 1);
    free(out);
    /* a speculative step's rows (the prefill with its draft, then drafts and window) too */
    out = t_runf(&st, "%s plan -m %s -p 'Once upon a time there was. Once upon a time' --lookahead 3,3,2 -s 2 "
                 "--temp 0 --attn 2:1 --json", bin, model_path);
    T_CHECK(st == 0, "plan --lookahead --attn --json: %.300s", out);
    if (st == 0) check_plan_json(out, 2, 1);
    free(out);
    out = t_runf(&st, "%s plan -m %s -p 'Once upon a time' -k 2 -s 2 --attn 0 --json", bin, model_path);
    if (st == 0) check_plan_json(out, 0, -1);
    free(out);
    out = t_runf(&st, "%s plan -m %s -p 'Once upon' -k 2 -s 2 --temp 0 --attn 4 2>&1", bin, model_path);
    T_CHECK(st == 0 && strstr(out, "attention weight in tenths") && strstr(out, "row 0  #"),
            "plan --attn: digits in the grid (the first row sees its own slot alone: '#')\n%s", out);
    free(out);
    /* forks that show something: one prompt's K branches start with distinct tokens */
    out = t_runf(&st, "%s plan -m %s -p 'Once upon' -k 3 -s 2 --temp 0 --json", bin, model_path);
    json_t *doc = json_loads(out, 0, NULL);
    json_t *smp = json_object_get(json_array_get(json_object_get(doc, "steps"), 0), "sampled");
    int64_t t[3] = {-1, -2, -3};
    for (size_t i = 0; i < 3 && i < json_array_size(smp); i++)
        t[i] = json_integer_value(json_object_get(json_array_get(smp, i), "token"));
    T_CHECK(st == 0 && json_array_size(smp) == 3 && t[0] != t[1] && t[1] != t[2] && t[0] != t[2],
            "plan -k 3 --temp 0: three distinct first tokens (%lld %lld %lld)", (long long)t[0],
            (long long)t[1], (long long)t[2]);
    json_decref(doc);
    free(out);
    test_rope_svg(bin, model_path);
    test_slide(bin, model_path);
    out = t_runf(&st, "%s plan -m %s -p 'Once' -k 2 -s 1 --attn 99 2>&1", bin, model_path);
    T_CHECK(st != 0 && strstr(out, "layers"), "plan --attn 99 refused: %s", out);
    free(out);
}

/* The ring: ten steps pushed keep the last MVH_KEEP, the newest at back 0; a view looked
 * at stays in view while newer ones come; moves stop at both ends. */
static void test_history(void) {
    mv_history h;
    mvh_init(&h);
    mask_view *v = malloc(sizeof *v);
    mv_init(v);
    int32_t bad = 0;
    for (int32_t s = 0; s < 10; s++) {
        v->step = s;
        v->n_rows = 1, v->rows[0].want = s % 2; /* odd steps: every row returns logits */
        mv_set_kind(v, "grow");
        bad += !mvh_push(&h, v);
        if (s == 4) bad += mvh_move(&h, -3) != 3 || mvh_at(&h, h.back)->step != 1;
    }
    T_CHECK(bad == 0 && h.n == MVH_KEEP && mvh_at(&h, 0)->step == 9 && mvh_at(&h, MVH_KEEP - 1)->step == 2 &&
            !mvh_at(&h, MVH_KEEP), "ring: %d kept, newest %d, oldest %d", h.n, mvh_at(&h, 0)->step,
            mvh_at(&h, MVH_KEEP - 1)->step);
    T_CHECK(h.back == MVH_KEEP - 1 && mvh_at(&h, h.back)->step == 2,
            "the view looked at moved back with each push until it was the oldest: back %d", h.back);
    T_CHECK(!strcmp(mvh_at(&h, 0)->kind, "grow") && !strcmp(mvh_at(&h, 1)->kind, "prefill + grow"),
            "kinds: '%s', '%s'", mvh_at(&h, 0)->kind, mvh_at(&h, 1)->kind);
    T_CHECK(mvh_move(&h, -5) == MVH_KEEP - 1 && mvh_move(&h, 3) == MVH_KEEP - 4 && mvh_move(&h, 20) == 0,
            "moves stop at both ends");
    mvh_clear(&h);
    T_CHECK(h.n == 0 && !mvh_at(&h, 0) && mvh_move(&h, -1) == 0, "cleared");
    mvh_free(&h);
    free(v);
}

/* On a model with recurrent layers the header says so, with the states the forest holds:
 * a prompt, then three branches of it, one state each. */
static void test_recurrent_header(void) {
    mkmodel_params mp = mkmodel_default_params();
    mp.arch = "qwen35", mp.n_layer = 4;
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    model_ctx *c = m ? t_new_ctx(m, 64) : NULL;
    forest *f = forest_init(64, 0);
    step_plan p;
    step_plan_init(&p);
    int32_t toks[4] = {1, 300, 301, 302};
    forest_id end;
    bool ok = c && forest_add_root(f, toks, NULL, 4, 0, &end, &err) == ST_OK &&
              step_forest(f, &p, c, &err) == ST_OK;
    for (int32_t b = 0; ok && b < 3; b++) {
        int32_t t = 310 + b;
        ok = forest_append(f, end, &t, NULL, 1, NULL, &err) == ST_OK;
    }
    ok = ok && step_forest(f, &p, c, &err) == ST_OK;
    mask_view *v = malloc(sizeof *v);
    char head[512] = "";
    if (ok) {
        mv_capture(v, f, NULL, &p, 1);
        mv_header(v, head, sizeof head, 400, false);
    }
    T_CHECK(ok && strstr(head, "3 of 4 layers recurrent (no mask): 3 states of 16.5 KiB held"),
            "the mask header on qwen35: %s (%s)", head, err.msg);
    free(v);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    model_free(m);
}

int main(void) {
    test_history();
    test_recurrent_header();
    test_view();
    test_plan_cli();
    return t_done();
}
