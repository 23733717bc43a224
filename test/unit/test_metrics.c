/* test_metrics.c — the JSON-lines metrics sink: a normal file round-trips the iteration,
 * validation and test-set lines (iteration, loss, no bubble keys without pp, the interval fields
 * only on a logged iteration, null for a non-finite number); the stdout line is Megatron's
 * training_log line (the interval's loss, time and skipped count when it has one, then mtrain's
 * fields and the ETA) and the validation lines Megatron's, test set included; a file whose writes fail
 * (/dev/full: ENOSPC on every write, Linux) makes mt_metrics_log_iter / _log_eval return
 * MT_ERR_IO naming the path, errno's text and the fix, never a silent loss; a write cut short
 * by the file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored: EFBIG) leaves only whole lines; a file
 * another process holds open as its metrics file is refused naming that pid and is left as it
 * was; an existing file is emptied on open; no file = MT_OK. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/test.h"
#include "train/metrics.h"

static mt_iter_metrics sample(int64_t it, double loss) {
    mt_iter_metrics m;
    memset(&m, 0, sizeof m);
    m.iteration = it;
    m.train_iters = 10;
    m.consumed_samples = 8 * it;
    m.global_batch = 8;
    m.ms_per_iter = 12.5;
    m.tokens_per_s = 1000.0;
    m.tflops = 0.5;
    m.mfu = -1;
    m.lr = 3e-4;
    m.lm_loss = loss;
    m.grad_norm = 1.25;
    m.bubble = -1;
    m.bubble_formula = -1;
    return m;
}

/* dir (a mkdtemp template) made, path = dir/metrics.jsonl */
static void metrics_path_in_new_dir(char *dir, char *path, size_t n_path) {
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, n_path, "%s/metrics.jsonl", dir);
}

static void test_round_trip(void) {
    char dir[] = "/tmp/mt_test_metrics_XXXXXX", path[256];
    metrics_path_in_new_dir(dir, path, sizeof path);
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, path);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    mt_iter_metrics m1 = sample(1, 10.75), m2 = sample(2, 9.5);
    CHECKF(mt_metrics_log_iter(NULL, &s, &m1) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_metrics_log_iter(NULL, &s, &m2) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_metrics_log_eval(NULL, &s, 2, 9.25) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_metrics_log_eval_kind(NULL, &s, 2, MT_EVAL_TEST, 9.0) == MT_OK, "%s", mt_last_error());
    mt_iter_metrics m3 = sample(3, 8.0); /* a diverged iteration: non-finite numbers are null */
    m3.grad_norm = INFINITY;
    m3.interval_iters = 2;
    m3.interval_lm_loss = 8.5;
    m3.interval_skipped = 1;
    CHECKF(mt_metrics_log_iter(NULL, &s, &m3) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_metrics_close(&s) == MT_OK, "%s", mt_last_error());
    CHECK(!s.is_open);
    CHECK(mt_metrics_close(&s) == MT_OK); /* closing twice is harmless */

    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char lines[6][1024] = {{0}};
    int n = 0;
    while (f && n < 6 && fgets(lines[n], sizeof lines[n], f)) n++;
    if (f) fclose(f);
    CHECKF(n == 5, "%d lines", n);
    CHECK_STR_CONTAINS(lines[0], "{\"iteration\":1,");
    CHECK_STR_CONTAINS(lines[0], "\"lm_loss\":10.75,");
    CHECK_STR_CONTAINS(lines[0], "\"consumed_samples\":8,");
    CHECK_STR_CONTAINS(lines[0], "\"mfu\":null");
    CHECK(strstr(lines[0], "bubble") == NULL);
    CHECK_STR_CONTAINS(lines[1], "{\"iteration\":2,");
    CHECK_STR_CONTAINS(lines[1], "\"lm_loss\":9.5,");
    CHECK_STR_CONTAINS(lines[2], "{\"iteration\":2,\"val_loss\":9.25,");
    CHECK_STR_CONTAINS(lines[3], "{\"iteration\":2,\"test_loss\":9,");
    CHECK_STR_CONTAINS(lines[4], "\"grad_norm\":null,");
    CHECK_STR_CONTAINS(lines[4], "\"lm_loss\":8,");
    CHECK_STR_CONTAINS(lines[4], "\"interval_iters\":2,\"lm_loss_interval_avg\":8.5,");
    CHECK_STR_CONTAINS(lines[4], "\"interval_skipped\":1,");
    CHECK(strstr(lines[1], "interval") == NULL);
    for (int i = 0; i < n; i++) CHECKF(lines[i][strlen(lines[i]) - 2] == '}', "line %d: %s", i, lines[i]);
    unlink(path);
    rmdir(dir);
}

static void test_no_file(void) {
    mt_metrics_sink s;
    CHECK(mt_metrics_open(&s, "") == MT_OK);
    CHECK(!s.is_open);
    mt_iter_metrics m = sample(1, 5.0);
    CHECK(mt_metrics_log_iter(NULL, &s, &m) == MT_OK);
    CHECK(mt_metrics_log_iter(NULL, NULL, &m) == MT_OK);
    CHECK(mt_metrics_log_eval(NULL, &s, 1, 5.0) == MT_OK);
    CHECK(mt_metrics_close(&s) == MT_OK);
}

static void test_unwritable_dir(void) {
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, "/nonexistent-dir/metrics.jsonl");
    CHECK(st == MT_ERR_IO);
    if (st == MT_ERR_IO) CHECK_STR_CONTAINS(mt_last_error(), "/nonexistent-dir/metrics.jsonl");
}

/* /dev/full accepts the open; every write to it fails with ENOSPC. */
static void test_disk_full(void) {
    if (access("/dev/full", W_OK) != 0) {
        printf("no writable /dev/full (not Linux?): disk-full checks skipped\n");
        return;
    }
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, "/dev/full");
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    mt_iter_metrics m = sample(3, 7.0);
    st = mt_metrics_log_iter(NULL, &s, &m);
    CHECKF(st == MT_ERR_IO, "log_iter on /dev/full returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) {
        const char *e = mt_last_error();
        CHECK_STR_CONTAINS(e, "/dev/full");
        CHECK_STR_CONTAINS(e, strerror(ENOSPC));
        CHECK_STR_CONTAINS(e, "logging.metrics");
        CHECK_STR_CONTAINS(e, "--metrics");
    }
    st = mt_metrics_log_eval(NULL, &s, 3, 7.0); /* after a failure: still an error, never silence */
    CHECKF(st == MT_ERR_IO, "log_eval on /dev/full returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) CHECK_STR_CONTAINS(mt_last_error(), "/dev/full");
    CHECK(!s.is_open);
    CHECK(mt_metrics_close(&s) == MT_OK); /* the failure was reported once, by the write */

    /* an eval line as the first write fails the same way */
    st = mt_metrics_open(&s, "/dev/full");
    CHECKF(st == MT_OK, "%s", mt_last_error());
    if (st != MT_OK) return;
    st = mt_metrics_log_eval(NULL, &s, 5, 7.0);
    CHECKF(st == MT_ERR_IO, "first log_eval on /dev/full returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) {
        CHECK_STR_CONTAINS(mt_last_error(), "/dev/full");
        CHECK_STR_CONTAINS(mt_last_error(), strerror(ENOSPC));
    }
    CHECK(mt_metrics_close(&s) == MT_OK);
}

/* Counts the lines of path; *whole = every line ends in '\n' and is one JSON object. */
static int count_lines(const char *path, int *whole) {
    FILE *f = fopen(path, "r");
    *whole = f != NULL;
    if (!f) return -1;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (len < 3 || line[0] != '{' || line[len - 1] != '\n' || line[len - 2] != '}') *whole = 0;
        n++;
    }
    fclose(f);
    return n;
}

/* RLIMIT_FSIZE below the file's end, SIGXFSZ ignored: the write that crosses it is cut short
 * (a partial write, then EFBIG); the sink cuts the file back to its whole lines. */
static void test_file_size_limit(void) {
    char dir[] = "/tmp/mt_test_metrics_XXXXXX", path[256];
    metrics_path_in_new_dir(dir, path, sizeof path);
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, path);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    lim = old;
    lim.rlim_cur = 1000; /* a line is ~200 bytes: the 5th or 6th crosses 1000 mid-line */
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    int i = 1;
    for (; st == MT_OK && i <= 50; i++) {
        mt_iter_metrics m = sample(i, 10.0 / i);
        st = mt_metrics_log_iter(NULL, &s, &m);
    }
    const char *e = mt_last_error();
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, old_xfsz);
    CHECKF(st == MT_ERR_IO, "log_iter past the file-size limit returned %s after %d lines", mt_status_name(st), i - 1);
    if (st == MT_ERR_IO) {
        CHECK_STR_CONTAINS(e, path);
        CHECK_STR_CONTAINS(e, strerror(EFBIG));
        CHECK_STR_CONTAINS(e, "ulimit -f");
    }
    CHECK(mt_metrics_close(&s) == MT_OK);
    int whole = 0;
    const int n = count_lines(path, &whole);
    CHECKF(whole && n == i - 2 && n > 0, "%d lines (whole: %d) after the write of line %d failed", n, whole, i - 1);
    unlink(path);
    rmdir(dir);
}

/* A child process opens the file as its metrics sink and writes a line; the parent's open is
 * refused naming the child's pid, and the child's file is not truncated. After the child
 * closes, the parent may open it (and empties it). */
static void test_lock(void) {
    char dir[] = "/tmp/mt_test_metrics_XXXXXX", path[256];
    metrics_path_in_new_dir(dir, path, sizeof path);
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        mt_metrics_sink cs;
        mt_iter_metrics m = sample(1, 3.0);
        char c = mt_metrics_open(&cs, path) == MT_OK && mt_metrics_log_iter(NULL, &cs, &m) == MT_OK ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1) _exit(2);
        if (read(go[0], &c, 1) != 1) _exit(3);
        _exit(mt_metrics_close(&cs) == MT_OK ? 0 : 4);
    }
    char c = 0;
    CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
    mt_metrics_sink s;
    mt_status st = mt_metrics_open(&s, path);
    CHECKF(st == MT_ERR_IO, "open of a file another process writes returned %s", mt_status_name(st));
    if (st == MT_ERR_IO) {
        char want[64];
        snprintf(want, sizeof want, "process %ld", (long)pid);
        CHECK_STR_CONTAINS(mt_last_error(), path);
        CHECK_STR_CONTAINS(mt_last_error(), "another mtrain run");
        CHECK_STR_CONTAINS(mt_last_error(), want);
        CHECK_STR_CONTAINS(mt_last_error(), "--metrics");
    } else {
        mt_metrics_close(&s);
    }
    int whole = 0;
    CHECKF(count_lines(path, &whole) == 1 && whole, "the first run's line is gone");
    CHECK(write(go[1], "x", 1) == 1);
    int wst = 0;
    CHECK(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    st = mt_metrics_open(&s, path);
    CHECKF(st == MT_OK, "open after the other run ended: %s", mt_last_error());
    CHECK(mt_metrics_close(&s) == MT_OK);
    CHECKF(count_lines(path, &whole) == 0, "an existing metrics file is emptied on open");
    close(ready[0]); close(ready[1]); close(go[0]); close(go[1]);
    unlink(path);
    rmdir(dir);
}

/* The stdout line goes to `log` and the status reflects only the metrics file. */
static void test_log_line(void) {
    char *buf = NULL;
    size_t n = 0;
    FILE *log = open_memstream(&buf, &n);
    CHECK(log != NULL);
    if (!log) return;
    mt_metrics_sink s;
    CHECK(mt_metrics_open(&s, NULL) == MT_OK);
    char *buf2 = NULL;
    size_t n2 = 0;
    FILE *log2 = open_memstream(&buf2, &n2);
    CHECK(log2 != NULL);
    if (!log2) return;
    mt_iter_metrics m = sample(4, 6.5);
    CHECK(mt_metrics_log_iter(log, &s, &m) == MT_OK);
    CHECK(mt_metrics_log_eval(log, &s, 4, 6.5) == MT_OK);
    m.interval_iters = 4; /* the line prints the interval's figures */
    m.interval_lm_loss = 7.25;
    m.interval_skipped = 2;
    m.interval_ms = 20.0;
    m.interval_mfu = -1;
    m.eta_s = 3725;
    CHECK(mt_metrics_log_iter(log, &s, &m) == MT_OK);
    CHECK(mt_metrics_log_eval_kind(log, &s, 10, MT_EVAL_TEST, 6.5) == MT_OK);
    fclose(log);
    CHECK_STR_CONTAINS(buf, " iteration        4/      10 | consumed samples:           32 |");
    CHECK_STR_CONTAINS(buf, "lm loss: 6.500000E+00 | loss scale: 1.0 | grad norm: 1.250 |");
    CHECK_STR_CONTAINS(buf, "\n validation loss at iteration 4 | lm loss value: 6.500000E+00 | lm loss PPL: ");
    CHECK_STR_CONTAINS(buf, "| elapsed time per iteration (ms): 20.0 | learning rate: "); /* no --log-throughput */
    CHECK_STR_CONTAINS(buf, "| lm loss: 7.250000E+00 | loss scale: 1.0 |");
    /* Megatron's line ends at its last field; mtrain's figures follow on their own line */
    CHECK_STR_CONTAINS(buf, "| number of skipped iterations:   2 | number of nan iterations:   0 |\n"
                            "mtrain: iteration 4 | throughput (tokens/s): ");
    CHECK_STR_CONTAINS(buf, "| ETA: 1h02m |\n");
    s.throughput = 1; /* --log-throughput: Megatron's field after the elapsed time */
    CHECK(mt_metrics_log_iter(log2, &s, &m) == MT_OK);
    fclose(log2);
    CHECK_STR_CONTAINS(buf2, "| elapsed time per iteration (ms): 20.0 | throughput per GPU (TFLOP/s/GPU): ");
    CHECK_STR_CONTAINS(buf, "\n validation loss at iteration 10 on test set | lm loss value: 6.500000E+00 |");
    free(buf);
    free(buf2);
}

int main(void) {
    test_round_trip();
    test_no_file();
    test_unwritable_dir();
    test_disk_full();
    test_file_size_limit();
    test_lock();
    test_log_line();
    TEST_MAIN_END();
}
