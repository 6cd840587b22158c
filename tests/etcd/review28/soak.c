/* SPDX-License-Identifier: MIT */
/* P processes loop acquire(2 s lease, forever)/strict commit/release on one
 * key; the parent SIGSTOPs a random one for 1..4 s, again and again.
 * Checks: an acquisition never overlaps another's unexpired, unreleased
 * holding; tokens rise in acquisition order; strict commits accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include "fencelock.h"
#define P 6
struct sh { _Atomic uint64_t tok[P], dl[P]; _Atomic uint64_t last; _Atomic int overlaps, order, commit_bad, acqs, neterr; char why[512]; _Atomic int stop; };
static struct sh *sh;
static uint64_t now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
static void child(const char *uri,int me){ fl_region *r; if(fl_open(uri,&r)) _exit(2);
  while(!atomic_load(&sh->stop)){ fl_lease l; int rc=fl_acquire(r,"k",2000000000ull,-1,&l);
    if(rc){ atomic_fetch_add(&sh->neterr,1); usleep(50000); continue; }
    uint64_t t=now();
    for(int j=0;j<P;j++){ if(j==me)continue; uint64_t d=atomic_load(&sh->dl[j]), tk=atomic_load(&sh->tok[j]);
      if(tk && d>t && atomic_fetch_add(&sh->overlaps,1)==0) snprintf(sh->why,sizeof sh->why,"proc %d got %llu while %d holds %llu with %.3f s left",me,(unsigned long long)l.token,j,(unsigned long long)tk,(d-t)/1e9);}
    atomic_store(&sh->dl[me],l.deadline_ns); atomic_store(&sh->tok[me],l.token);
    uint64_t p=atomic_exchange(&sh->last,l.token); if(p>=l.token) atomic_fetch_add(&sh->order,1);
    atomic_fetch_add(&sh->acqs,1);
    uint64_t acc=0; rc=fl_commit(r,&l,"rec",&l.token,8,FL_COMMIT_STRICT,&acc);
    if(rc && rc!=-ESTALE && rc!=-EAGAIN) atomic_fetch_add(&sh->commit_bad,1);
    if(rc==-ESTALE && now()<l.deadline_ns) atomic_fetch_add(&sh->commit_bad,1);
    atomic_store(&sh->tok[me],0); atomic_store(&sh->dl[me],0);
    fl_release(r,&l);
  } fl_close(r); _exit(0);}
int main(int argc,char**argv){ sh=mmap(NULL,sizeof *sh,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  int secs=atoi(argv[2]); pid_t pid[P]; for(int i=0;i<P;i++){pid[i]=fork(); if(!pid[i]) child(argv[1],i);}
  srand(getpid()); uint64_t end=now()+secs*1000000000ull; int stops=0;
  while(now()<end){ int v=rand()%P; usleep((rand()%800)*1000); kill(pid[v],SIGSTOP); stops++; usleep((1000+rand()%3000)*1000); kill(pid[v],SIGCONT);}
  atomic_store(&sh->stop,1); for(int i=0;i<P;i++){ kill(pid[i],SIGCONT); waitpid(pid[i],NULL,0);}
  printf("stops %d acquisitions %d overlaps %d order %d commit_bad %d acquire errors %d %s\n",stops,sh->acqs,sh->overlaps,sh->order,sh->commit_bad,sh->neterr,sh->why); return 0;}
