/* SPDX-License-Identifier: MIT */
/*
 * app.c - a program outside the tree that links the installed library: it
 * prints the version of the library it loaded and checks that it agrees
 * with the header it was compiled with.  No region needed.
 */
#include <errno.h>
#include <fencelock.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(fl_version(), FL_VERSION_STRING) != 0) {
        fprintf(stderr, "fl_version() %s, header %s\n", fl_version(), FL_VERSION_STRING);
        return 1;
    }
    if (fl_version_number() != FL_VERSION_NUMBER) {
        fprintf(stderr, "fl_version_number() %#x, header %#x\n", fl_version_number(),
                (unsigned)FL_VERSION_NUMBER);
        return 1;
    }
    if (strcmp(fl_err_name(-ESTALE), "ESTALE") != 0)
        return 1;
    printf("%s\n", fl_version());
    return 0;
}
