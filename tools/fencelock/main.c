/* SPDX-License-Identifier: MIT */
/*
 * main.c - the fencelock command: finds the subcommand and hands it the rest
 * of the command line.  A new subcommand is one entry in `commands` plus its
 * own source file; nothing else here changes.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fencelock.h"
#include "run.h"

struct command {
    const char *name;
    const char *summary; /* one line for the command list */
    cli_command_fn *run;
    const char *usage;   /* its full help text */
};

static const struct command commands[] = {
    {"status", "show the region's parameters, clients, locks and records", status_main,
     status_usage},
    {"metrics", "print every counter in the Prometheus text format", metrics_main,
     metrics_usage},
    {"run", "run a command while holding a key, its fencing token in the environment",
     run_main, run_usage},
    {"commit", "commit a file or stdin to a fenced record with a key's token", commit_main,
     commit_usage},
    {"read", "write a fenced record's value (and its fence token)", read_main, read_usage},
    {"etcd-epoch", "show or bump an etcd region's token epoch (after a snapshot restore)",
     etcd_epoch_main, etcd_epoch_usage},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_usage(FILE *f)
{
    fputs("Usage: fencelock COMMAND [OPTIONS]\n"
          "       fencelock help [COMMAND]\n"
          "       fencelock --help | --version\n"
          "\n"
          "Work with a fencelock region: the memory-mapped file, kept by the supervisor\n"
          "fencelockd, in which the processes of one host take leased locks with\n"
          "fencing tokens and commit fenced records. Inspect it (status, metrics),\n"
          "run a command under one of its locks (run), and commit and read fenced\n"
          "records from a shell (commit, read).\n"
          "\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-16s%s\n", commands[i].name, commands[i].summary);
    fputs("  help [COMMAND]  show this help, or the help of COMMAND\n"
          "\n"
          "Options:\n"
          "  -h, --help      show this help and exit\n"
          "  -V, --version   show the version and exit\n"
          "\n"
          "Every command takes --help.  A command that reads a region takes\n"
          "-r, --region PATH; without it the region is $FENCELOCK_REGION, else\n"
          "/run/fencelock/region for root, else $XDG_RUNTIME_DIR/fencelock/region,\n"
          "else /dev/shm/fencelock-UID/region.  A region may also be an etcd\n"
          "cluster, etcd://HOST:PORT[,HOST:PORT...]/PREFIX (docs/etcd.md).\n"
          "\n" CLI_ENVIRONMENT_TEXT "\n" CLI_EXIT_STATUS_TEXT
          "\n"
          "Examples:\n"
          "  fencelock status\n"
          "      the default region: its supervisor, clients, keys and records\n"
          "  fencelock status --region /run/myapp/locks\n"
          "      a region at another path\n"
          "  fencelock status --json | jq '.locks[] | select(.state == \"held\")'\n"
          "      the held keys, for scripts\n"
          "\n"
          "See also: fencelockd --help.\n",
          f);
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int help_command(int argc, char **argv)
{
    if (argc > 2)
        return fl__usage_error("help: unexpected argument '%s'", argv[2]);
    if (argc == 1) {
        print_usage(stdout);
        return cli_finish_stdout();
    }
    const struct command *c = find_command(argv[1]);
    if (!c)
        return fl__usage_error("help: unknown command '%s'", argv[1]);
    fputs(c->usage, stdout);
    return cli_finish_stdout();
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return fl__usage_error("no command given");
    const char *first = argv[1];
    /* Global options are few and come alone, so no getopt: the subcommand
     * runs getopt on its own arguments from a clean state. */
    if (strcmp(first, "-h") == 0 || strcmp(first, "--help") == 0) {
        if (argc > 2)
            return fl__usage_error("unexpected argument '%s' after --help", argv[2]);
        print_usage(stdout);
        return cli_finish_stdout();
    }
    if (strcmp(first, "-V") == 0 || strcmp(first, "--version") == 0) {
        if (argc > 2)
            return fl__usage_error("unexpected argument '%s' after --version", argv[2]);
        printf("fencelock %d.%d.%d\n", FL_VERSION_MAJOR, FL_VERSION_MINOR, FL_VERSION_PATCH);
        return cli_finish_stdout();
    }
    if (first[0] == '-')
        return fl__usage_error("unknown option '%s'", first);
    if (strcmp(first, "help") == 0)
        return help_command(argc - 1, argv + 1);
    const struct command *c = find_command(first);
    if (!c)
        return fl__usage_error("unknown command '%s'", first);
    static char program[64]; /* "fencelock status": the messages' name from here on */
    snprintf(program, sizeof program, "fencelock %s", c->name);
    fl__set_program(program);
    return c->run(argc - 1, argv + 1);
}
