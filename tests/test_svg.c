/* test_svg.c - the SVG picture (ui/svg.h): parsed back (a small XML checker here, and
 * Python's xml.etree when python3 is present) and checked for what it shows: one box per
 * live node with its RoPE position and KV slot, one filled cell per (row, slot) the mask
 * lets a row see, hostile token text escaped, each part alone, and a failed write. */
#include "t.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "../ui/mask_view.h"
#include "../ui/svg.h"
#include "../ui/uline.h"
#include "t_run.h"

/* Well-formed enough for our output: valid UTF-8, tags balanced and named alike, entities
 * known, no '<' or '&' raw in text. Returns NULL or what is wrong. */
static const char *xml_check(const char *s) {
    static char why[128];
    const char *stack[64];
    size_t depth = 0, lens[64];
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned cp;
        size_t n = ui_utf8_char(p, &cp);
        if (n == 0) return "not UTF-8";
        if (*p == '&') {
            const char *e = (const char *)p + 1;
            if (strncmp(e, "lt;", 3) && strncmp(e, "gt;", 3) && strncmp(e, "amp;", 4) && strncmp(e, "quot;", 5))
                return "unknown entity";
        }
        if (*p != '<') {
            p += n;
            continue;
        }
        const char *end = strchr((const char *)p, '>');
        if (!end) return "a tag without '>'";
        if (p[1] == '?') {
            p = (const unsigned char *)end + 1;
            continue;
        }
        bool close = p[1] == '/', empty = end[-1] == '/';
        const char *name = (const char *)p + 1 + close;
        size_t len = strcspn(name, " />");
        if (close) {
            if (depth == 0 || lens[depth - 1] != len || strncmp(stack[depth - 1], name, len)) {
                snprintf(why, sizeof why, "</%.*s> closes the wrong tag", (int)len, name);
                return why;
            }
            depth--;
        } else if (!empty) {
            if (depth == 64) return "too deep";
            stack[depth] = name, lens[depth++] = len;
        }
        p = (const unsigned char *)end + 1;
    }
    return depth == 0 ? NULL : "unclosed tags";
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static char *render(const forest *f, mask_view *mv, int parts, st_code *rc) {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    st_err err = {0};
    *rc = svg_write(fp, f, NULL, mv, parts, &err);
    fclose(fp);
    return buf;
}

/* Python's own XML parser reads the file back (skipped without python3). */
static void python_parses(const char *svg) {
    if (system("python3 -c 'import xml.etree.ElementTree' 2>/dev/null") != 0) {
        T_SKIP("no python3 with xml.etree");
        return;
    }
    char path[] = "/tmp/md-svg-XXXXXX";
    int fd = mkstemp(path);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!fp) return;
    fputs(svg, fp);
    fclose(fp);
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); "
             "sys.exit(0 if r.tag.endswith(\"svg\") else 1)' %s",
             path);
    T_CHECK(system(cmd) == 0, "python's xml.etree parses the picture");
    unlink(path);
}

/* `plan --svg` and `--svg-mask` write the pictures of a real run: well-formed, one box per
 * node (2 prompt tokens under a 3-token context, 2 branches of 3 tokens each), the mask
 * of the last step; not with --draft. */
static void test_plan_svg(void) {
    char bin[4096], model[4096];
    if (!t_cli_setup(bin, sizeof bin, model, sizeof model)) return;
    char dir[] = "/tmp/md-plan-svg-XXXXXX";
    if (!mkdtemp(dir)) return;
    int st;
    char *out = t_runf(&st, "%s plan -m %s --context 'Lily liked' -p 'The' -k 2 -s 3 --svg %s/a.svg "
                       "--svg-mask %s/m.svg >/dev/null 2>&1", bin, model, dir, dir);
    free(out);
    char path[256];
    snprintf(path, sizeof path, "%s/a.svg", dir);
    FILE *fp = fopen(path, "r");
    char *svg = NULL;
    size_t len = 0;
    if (fp) {
        FILE *mem = open_memstream(&svg, &len);
        int ch;
        while ((ch = fgetc(fp)) != EOF) fputc(ch, mem);
        fclose(mem);
        fclose(fp);
    }
    const char *bad = svg ? xml_check(svg) : "missing";
    T_CHECK(st == 0 && !bad, "plan --svg: exit %d, %s", st, bad ? bad : "well-formed");
    int nodes = svg ? count(svg, "class=\"node\"") : 0, rows = svg ? count(svg, "class=\"rowlabel\"") : 0;
    T_CHECK(nodes > 4 && rows == 2, "%d node boxes, %d mask rows (the last step: 2 branches)", nodes, rows);
    if (svg) python_parses(svg);
    free(svg);
    snprintf(path, sizeof path, "%s/m.svg", dir);
    T_CHECK(access(path, R_OK) == 0, "--svg-mask wrote %s", path);
    unlink(path);
    snprintf(path, sizeof path, "%s/a.svg", dir);
    unlink(path);
    out = t_runf(&st, "%s plan -m %s --draft --svg %s/d.svg 2>&1", bin, model, dir);
    T_CHECK(st == 2 && strstr(out, "--svg"), "--svg with --draft: exit %d '%s'", st, out);
    free(out);
    rmdir(dir);
}

int main(void) {
    forest *f = forest_init(64, 0);
    int32_t prompt[4] = {1, 2, 3, 4}, chain[3] = {5, 6, 7};
    forest_id root, tip[2];
    forest_add_root(f, prompt, NULL, 4, 0, &root, NULL);
    for (int i = 0; i < 2; i++) forest_append(f, root, chain, NULL, 3, &tip[i], NULL);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 10, "plan of 10 rows: %s", err.msg);
    mask_view *mv = malloc(sizeof *mv);
    mv_init(mv);
    mv_capture(mv, f, NULL, &p, 0);
    snprintf(mv->rows[9].text, sizeof mv->rows[9].text, "<&\"\xff");

    st_code rc;
    char *svg = render(f, mv, SVG_TREE | SVG_MASK, &rc);
    const char *bad = xml_check(svg);
    T_CHECK(rc == ST_OK && !bad, "well-formed: %s", bad ? bad : "yes");
    python_parses(svg);
    T_CHECK(count(svg, "class=\"node\"") == forest_n_live(f), "%d node boxes for %d nodes",
            count(svg, "class=\"node\""), forest_n_live(f));
    int on = 0;
    for (int32_t r = 0; r < mv->n_rows; r++)
        for (int32_t d = 0; d < mv->n_dcols; d++) on += mv_cell(mv, r, d) == '#';
    T_CHECK(on == 4 * 5 / 2 + 2 * (4 * 3 + 3 * 4 / 2) && count(svg, "class=\"on\"") == on,
            "%d filled cells for the %d (row, slot) pairs the mask allows", count(svg, "class=\"on\""), on);
    char where[64];
    const forest_node *last = forest_get(f, tip[1]);
    snprintf(where, sizeof where, "data-pos=\"%d\" data-slot=\"%d\"", last->depth, last->kv_slot);
    T_CHECK(last->depth == 6 && strstr(svg, where) && strstr(svg, "p6 s-"), "the last tip's box: %s", where);
    T_CHECK(strstr(svg, "&lt;&amp;&quot;\\xFF   p6") && strstr(svg, "[1]   p0 s"), "row labels escaped and placed");

    free(svg);
    svg = render(f, mv, SVG_MASK, &rc);
    T_CHECK(rc == ST_OK && !xml_check(svg) && !strstr(svg, "class=\"node\"") && strstr(svg, "class=\"on\""),
            "the mask alone");
    free(svg);
    svg = render(f, mv, SVG_TREE, &rc);
    T_CHECK(rc == ST_OK && !xml_check(svg) && strstr(svg, "class=\"node\"") && !strstr(svg, "class=\"on\""),
            "the tree alone");
    free(svg);

    FILE *full = fopen("/dev/full", "w");
    if (full) {
        T_CHECK(svg_write(full, f, NULL, mv, SVG_TREE | SVG_MASK, &err) == ST_ERR_IO, "a failed write: '%s'", err.msg);
        fclose(full);
    }
    T_CHECK(svg_save("/nonexistent-dir/x.svg", f, NULL, mv, SVG_TREE, &err) == ST_ERR_IO &&
                strstr(err.msg, "/nonexistent-dir/x.svg"),
            "an unwritable path is named: '%s'", err.msg);
    step_plan_cancel(f, &p);
    step_plan_free(&p);
    free(mv);
    forest_free(f);
    test_plan_svg();
    return t_done();
}
