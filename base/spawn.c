/* spawn.c - programs started without a shell (see spawn.h). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

extern char **environ;

int cl_spawn_wait(char *const argv[], const char *out_path)
{
    return cl_spawn_wait_err(argv, out_path, NULL);
}

int cl_spawn_wait_err(char *const argv[], const char *out_path, const char *err_path)
{
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_path) {
        posix_spawn_file_actions_addopen(&fa, 1, out_path, flags, 0600);
        if (err_path) posix_spawn_file_actions_addopen(&fa, 2, err_path, flags, 0600);
        else posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}
