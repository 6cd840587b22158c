/* SPDX-License-Identifier: MIT */
/* N threads of ONE handle loop acquire(forever)/release on one key R rounds;
 * checks exclusion and rising tokens; then: fl_close while a thread waits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>
#include "fencelock.h"
static fl_region *r; static _Atomic int holders, maxh, errs; static _Atomic uint64_t last; static _Atomic int bad;
static int rounds;
static void *th(void *a){(void)a; for(int i=0;i<rounds;i++){fl_lease l; int rc=fl_acquire(r,"k",30000000000ull,-1,&l);
  if(rc){atomic_fetch_add(&errs,1); fprintf(stderr,"acq %d %s\n",rc,fl_last_error()); continue;}
  int h=atomic_fetch_add(&holders,1)+1; if(h>atomic_load(&maxh))atomic_store(&maxh,h);
  uint64_t p=atomic_exchange(&last,l.token); if(p>=l.token)atomic_fetch_add(&bad,1);
  atomic_fetch_sub(&holders,1); rc=fl_release(r,&l); if(rc){atomic_fetch_add(&errs,1);fprintf(stderr,"rel %d %s\n",rc,fl_last_error());}}
  return NULL;}
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){ if(fl_open(argv[1],&r)){fprintf(stderr,"%s\n",fl_last_error());return 1;}
  int n=atoi(argv[2]); rounds=atoi(argv[3]); pthread_t t[512]; double t0=now();
  for(int i=0;i<n;i++)pthread_create(&t[i],NULL,th,NULL);
  for(int i=0;i<n;i++)pthread_join(t[i],NULL);
  printf("%d threads x %d rounds: %.1f s, max holders %d, token order violations %d, errors %d\n",n,rounds,now()-t0,maxh,bad,errs);
  if(argc>4){ fl_lease l; fl_acquire(r,"k",30000000000ull,0,&l); pthread_t w; rounds=1; pthread_create(&w,NULL,th,NULL); sleep(1);
    printf("closing while a thread waits...\n"); fflush(stdout); fl_close(r); sleep(3); printf("after close: the waiter thread %s\n", "still there (no crash)"); return 0;}
  fl_close(r); return 0;}
