/* test_plan_timeline.c — the timeline builder of `mtrain plan --timeline` (plan/schedule_timeline.c)
 * against the bubble formula and the tables' invariants:
 *  - unit costs (F 1, B 2): for 1F1B and interleaved, p 1..6, m 1..12, v 1..3 (interleaved needs
 *    m % p == 0), the simulated bubble equals (p-1)/(v m + p-1) within 1e-12 (exact arithmetic
 *    on small integers; the sum of p shares rounds) and the makespan is 3 (v m + p - 1);
 *  - every stage draws each (mb, chunk) once as F and once as B; F / B spans of one stage do not
 *    overlap, lie in [0, makespan], and the busy time is 3 m v;
 *  - per virtual stage costs: a heavier last virtual stage makes the bubble grow (and never shrink);
 *  - mt_pp_vstage_flops of gpt-tiny at pp 4: equal layers, the output layer on the last;
 *  - the terminal picture names the formula, and the SVG is written atomically (no temporary left).
 * About 0.1 s. */
#include <dirent.h>
#include <unistd.h>

#include "plan/schedule_timeline.h"
#include "core/recipe/recipe.h"
#include "test/test.h"

static void check_unit(mt_sched kind, int p, int m, int v) {
    mt_pp_timeline tl;
    mt_status st = mt_pp_timeline_build(kind, p, m, v, NULL, NULL, &tl);
    CHECKF(st == MT_OK, "%s p %d m %d v %d: %s", mt_schedule_name(kind), p, m, v, mt_last_error());
    if (st != MT_OK) return;
    const double vm = kind == MT_SCHED_INTERLEAVED ? (double)v * m : m;
    CHECKF(fabs(tl.bubble - (p - 1) / (vm + p - 1)) < 1e-12, "%s p %d m %d v %d: bubble %.15f", mt_schedule_name(kind),
           p, m, v, tl.bubble);
    CHECKF(fabs(tl.bubble - tl.formula) < 1e-12, "formula %.15f", tl.formula);
    CHECKF(fabs(tl.makespan - 3 * (vm + p - 1)) < 1e-9, "%s p %d m %d v %d: makespan %g", mt_schedule_name(kind), p, m,
           v, tl.makespan);
    for (int s = 0; s < p; s++) {
        int n_f = 0, n_b = 0;
        double last_end = 0, busy = 0;
        for (int i = tl.off[s]; i < tl.off[s + 1]; i++) {
            const mt_pp_step *x = &tl.steps[i];
            CHECK(tl.start[i] >= 0 && tl.end[i] >= tl.start[i] && tl.end[i] <= tl.makespan + 1e-9);
            if (mt_pp_op_is_comm(x->op)) continue;
            n_f += x->op == MT_PP_FWD;
            n_b += x->op == MT_PP_BWD;
            CHECK(tl.start[i] >= last_end - 1e-9); /* table order = time order, no overlap */
            last_end = tl.end[i];
            busy += tl.end[i] - tl.start[i];
        }
        CHECK(n_f == m * v && n_b == m * v);
        CHECK(fabs(busy - 3.0 * m * v) < 1e-9 && fabs(tl.busy[s] - busy) < 1e-9);
    }
    mt_pp_timeline_free(&tl);
}

static void test_unit_costs(void) {
    int n = 0;
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 12; m++) {
            check_unit(MT_SCHED_1F1B, p, m, 1), n++;
            for (int v = 1; v <= 3 && p > 1; v++)
                if (m % p == 0) check_unit(MT_SCHED_INTERLEAVED, p, m, v), n++;
        }
    printf("unit costs: %d schedules, bubble = formula\n", n);
    /* the acceptance pair */
    mt_pp_timeline a, b;
    CHECK(mt_pp_timeline_build(MT_SCHED_1F1B, 4, 8, 1, NULL, NULL, &a) == MT_OK);
    CHECK(mt_pp_timeline_build(MT_SCHED_INTERLEAVED, 4, 8, 2, NULL, NULL, &b) == MT_OK);
    CHECK_NEAR(a.bubble, 3.0 / 11, 1e-12, 0);
    CHECK_NEAR(b.bubble, 3.0 / 19, 1e-12, 0);
    mt_pp_timeline_free(&a);
    mt_pp_timeline_free(&b);
    /* invalid layouts are the schedule's errors */
    mt_pp_timeline c;
    CHECK(mt_pp_timeline_build(MT_SCHED_INTERLEAVED, 4, 6, 2, NULL, NULL, &c) == MT_ERR_CONFIG);
    CHECK(strstr(mt_last_error(), "training.global_batch") != NULL);
}

static void test_costs(void) {
    double f[8], b[8];
    for (int i = 0; i < 8; i++) f[i] = 1, b[i] = 2;
    mt_pp_timeline eq, heavy;
    CHECK(mt_pp_timeline_build(MT_SCHED_INTERLEAVED, 4, 8, 2, f, b, &eq) == MT_OK);
    CHECK_NEAR(eq.bubble, 3.0 / 19, 1e-12, 0);
    CHECK(!eq.unit);
    f[7] = 1.5, b[7] = 3; /* the last virtual stage (chunk 1 of stage 3) holds the output layer */
    CHECK(mt_pp_timeline_build(MT_SCHED_INTERLEAVED, 4, 8, 2, f, b, &heavy) == MT_OK);
    CHECK(heavy.bubble > eq.bubble + 0.01);
    CHECK(heavy.makespan > eq.makespan);
    mt_pp_timeline_free(&eq);
    mt_pp_timeline_free(&heavy);
}

static void test_vstage_flops(void) {
    static mt_recipe r;
    mt_recipe_defaults(&r);
    CHECK(mt_recipe_load_file(&r, "configs/gpt-tiny.yaml") == MT_OK);
    r.parallel.pipeline = 4;
    r.training.micro_batch = 1;
    CHECKF(mt_recipe_validate(&r, 4) == MT_OK, "%s", mt_last_error());
    double f[4];
    CHECKF(mt_pp_vstage_flops(&r, f, 4) == MT_OK, "%s", mt_last_error());
    CHECK(f[0] > 0 && f[0] == f[1] && f[1] == f[2] && f[3] > f[2]);
    CHECK(mt_pp_vstage_flops(&r, f, 3) == MT_ERR_CONFIG);
    r.parallel.pipeline = 3; /* 4 layers over 3 stages */
    CHECK(mt_pp_vstage_flops(&r, f, 3) == MT_ERR_CONFIG);
}

static void test_output(void) {
    mt_pp_timeline tl;
    CHECK(mt_pp_timeline_build(MT_SCHED_1F1B, 4, 8, 1, NULL, NULL, &tl) == MT_OK);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    mt_pp_timeline_print(f, &tl, 0);
    fclose(f);
    CHECK(strstr(text, "formula: (p-1)/(m+p-1) = 3/(8+3) = 27.3%") != NULL);
    CHECK(strstr(text, "  stage 3 |") != NULL && strstr(text, "F7") != NULL);
    free(text);
    char dir[] = "/tmp/mt-timeline-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/t.svg", dir);
    CHECK(mt_pp_timeline_write_svg(path, &tl, "a <title> & more") == MT_OK);
    FILE *g = fopen(path, "r");
    CHECK(g != NULL);
    if (g) {
        char buf[4096];
        size_t k = fread(buf, 1, sizeof buf - 1, g);
        buf[k] = 0;
        fclose(g);
        CHECK(strncmp(buf, "<?xml", 5) == 0 && strstr(buf, "a &lt;title&gt; &amp; more") != NULL);
    }
    int n_files = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) n_files += e->d_name[0] != '.';
    if (d) closedir(d);
    CHECK(n_files == 1); /* the temporary was renamed */
    unlink(path);
    rmdir(dir);
    mt_pp_timeline_free(&tl);
}

int main(void) {
    test_unit_costs();
    test_costs();
    test_vstage_flops();
    test_output();
    TEST_MAIN_END();
}
