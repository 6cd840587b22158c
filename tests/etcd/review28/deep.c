/* SPDX-License-Identifier: MIT */
/* Enqueue cost against queue depth: fake live entries put straight into
 * etcd under one lease, then fl_acquire with a 1 ms wait (enqueue, not head,
 * leave) timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include "fencelock.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  fl_region *r; int rc=fl_open(argv[1],&r); if(rc){fprintf(stderr,"open %s\n",fl_last_error());return 1;}
  int n=atoi(argv[2]); double best=1e9,sum=0;
  for(int i=0;i<n;i++){fl_lease l; double t=now(); rc=fl_acquire(r,"k",30000000000ull,1000000,&l); t=now()-t;
    if(rc==0){fl_release(r,&l);} sum+=t; if(t<best)best=t;}
  fl_lease l; double t=now(); rc=fl_acquire(r,"k",30000000000ull,0,&l); t=now()-t;
  printf("enqueue+leave (wait 1 ms): mean %.2f ms best %.2f ms; a try: %.2f ms (rc %d)\n",sum/n*1e3,best*1e3,t*1e3,rc);
  fl_close(r); return 0;}
