/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fencelock.h"
int main(int argc,char**argv){ /* URI KEY TIMEOUT_MS HOLD_MS */
  fl_region *r; int rc=fl_open(argv[1],&r); if(rc){printf("open %d %s\n",rc,fl_last_error());return 1;}
  fl_lease l; rc=fl_acquire(r,argv[2],10000000000ull,(int64_t)atoll(argv[3])*1000000,&l);
  printf("acq %d token %llu %s\n",rc,(unsigned long long)(rc?0:l.token),rc?fl_last_error():""); fflush(stdout);
  if(!rc){ usleep(atoi(argv[4])*1000); rc=fl_release(r,&l); printf("rel %d\n",rc);} fl_close(r); return 0;}
