/* The helpers the output-file tests share (t_files.h): scratch directories, links, the trace
 * reader, waiting for a child. Non-static so that t_files.c, t_files_own.c and t_files_exit.c
 * use one copy. */
#include "t_files.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

void tf_mkdir(tf_dir_t *d)
{
    snprintf(d->path, sizeof d->path, "/tmp/gpuarena-files-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->path));
}

char *tf_at(const tf_dir_t *d, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", d->path, name);
    return out;
}

int tf_entries(const char *dir, char *first, size_t len)
{
    DIR *dh = opendir(dir);
    ck_assert_ptr_nonnull(dh);
    int n = 0;
    for (struct dirent *e; (e = readdir(dh));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n++ == 0 && first) {
            size_t k = strnlen(e->d_name, len - 1);
            memcpy(first, e->d_name, k);
            first[k] = '\0';
        }
    }
    closedir(dh);
    return n;
}

void tf_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *dh = opendir(path);
        char sub[512];
        for (struct dirent *e; dh && (e = readdir(dh));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                tf_rmtree(sub);
            }
        if (dh)
            closedir(dh);
        rmdir(path);
    } else {
        unlink(path);
    }
}

long tf_trace_events(const char *path, uint32_t only_thread)
{
    ga_trace_t t;
    char msg[256];
    ga_trace_init(&t);
    long n = -1;
    if (ga_trace_read(path, &t, msg, sizeof msg) == 0 && t.truncated_bytes == 0) {
        n = 0;
        for (size_t i = 0; i < t.count; i++)
            n += !only_thread || t.events[i].thread == only_thread;
        if (only_thread && (size_t)n != t.count)
            n = -2; /* records of another thread (process) are in the file */
    }
    ga_trace_free(&t);
    return n;
}

void tf_setenv(const char *name, const char *value)
{
    ck_assert_int_eq(setenv(name, value, 1), 0);
}

void tf_own_link(tf_dir_t *d, const char *var, const char *to, const char *name,
                 char *link_path, size_t len)
{
    tf_mkdir(d);
    ck_assert_int_eq(symlink(to, tf_at(d, name, link_path, len)), 0);
    tf_setenv(var, link_path);
}

mode_t tf_lkind(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

int tf_wait(pid_t pid, FILE *err, char *buf, size_t len)
{
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    size_t n = fread(buf, 1, len - 1, (rewind(err), err));
    buf[n] = '\0';
    fclose(err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void tf_expect_dev_null(void)
{
    struct stat st;
    ck_assert_int_eq(lstat("/dev/null", &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3,
                  "/dev/null is still the null device");
}
