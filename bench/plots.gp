# SPDX-License-Identifier: MIT
# plots.gp - the benchmark plots, from the raw data the programs wrote.
# gnuplot -e "raw='DIR'; out='DIR'" plots.gp
# CDF files hold "value quantile" lines; the curves are described in the
# programs (bench/*.c).  A plot whose data is missing is skipped.

fexists(f) = system("test -s '" . f . "' && echo 1 || echo 0") + 0
set terminal pngcairo size 720,420 font "sans,9" noenhanced
set grid
set key bottom right
set ylabel "fraction of samples at or below"
set yrange [0:1]

# 1. uncontended: per-operation time (batch means)
if (fexists(raw . "/q1_fl_acqrel.dat")) {
    set output out . "/q1_uncontended.png"
    set title "Q1 uncontended: per-operation time (CDF of batch means)"
    set logscale x
    set xrange [10:5000]
    set xlabel "ns per operation"
    plot raw."/q1_fl_acqrel.dat" u 1:2 w l lw 2 t "fencelock acquire+release", \
         raw."/q1_fl_acqrel_key.dat" u 1:2 w l lw 2 t "fencelock acquire+release by key handle", \
         raw."/q1_fl_renew.dat" u 1:2 w l lw 2 t "fencelock renew", \
         raw."/q1_fl_check.dat" u 1:2 w l lw 2 t "fencelock check", \
         raw."/q1_mutex.dat" u 1:2 w l lw 2 t "robust mutex lock+unlock", \
         raw."/q1_flock.dat" u 1:2 w l lw 2 t "flock", \
         raw."/q1_ofd.dat" u 1:2 w l lw 2 t "OFD fcntl"
    unset logscale x
    set autoscale x
}

# 2. handoff latency with 2 processes; throughput against processes
if (fexists(raw . "/q2_handoff_fl_2.dat")) {
    set output out . "/q2_handoff.png"
    set title "Q2 handoff latency, 2 processes on 2 cores (CDF)"
    set logscale x
    set xlabel "ns from the releaser's unlock to the next holder's lock"
    plot raw."/q2_handoff_fl_2.dat" u 1:2 w l lw 2 t "fencelock", \
         raw."/q2_handoff_mutex_2.dat" u 1:2 w l lw 2 t "robust mutex", \
         raw."/q2_handoff_flock_2.dat" u 1:2 w l lw 2 t "flock", \
         raw."/q2_handoff_ofd_2.dat" u 1:2 w l lw 2 t "OFD fcntl"
    unset logscale x
}
if (fexists(raw . "/q2_throughput.dat")) {
    set output out . "/q2_throughput.png"
    set title "Q2 contended throughput on one key"
    set xlabel "processes"
    set ylabel "acquisitions per second"
    set autoscale y
    set logscale y
    set logscale x 2
    set key top right
    plot raw."/q2_throughput.dat" u 1:2 w lp lw 2 t "fencelock", \
         "" u 1:3 w lp lw 2 t "robust mutex", \
         "" u 1:4 w lp lw 2 t "flock", \
         "" u 1:5 w lp lw 2 t "OFD fcntl"
    unset logscale x
    unset logscale y
    set ylabel "fraction of samples at or below"
    set yrange [0:1]
    set key bottom right
}

# 3. commit cost against size
if (fexists(raw . "/q3_sizes.dat")) {
    set output out . "/q3_commit.png"
    set title "Q3 fenced commit against SQLite conditional UPDATE (median)"
    set xlabel "value size, bytes"
    set ylabel "ns per commit"
    set autoscale y
    set logscale xy
    set key top left
    plot raw."/q3_sizes.dat" u 1:2 w lp lw 2 t "fl_commit, uncontended", \
         "" u 1:3 w lp lw 2 t "SQLite UPDATE ... WHERE fence <= ?, WAL, synchronous=NORMAL"
    unset logscale xy
    set ylabel "fraction of samples at or below"
    set yrange [0:1]
    set key bottom right
}

# 4. takeover lateness
if (fexists(raw . "/q4_takeover_late.dat")) {
    set output out . "/q4_takeover.png"
    set title "Q4 how late after the paused holder's deadline the waiter held the key (CDF)"
    set logscale x
    set xlabel "µs past the lease deadline"
    if (fexists(raw . "/q4_takeover_late_stress.dat")) {
        plot raw."/q4_takeover_late.dat" u ($1/1000):2 w l lw 2 t "no added load", \
             raw."/q4_takeover_late_stress.dat" u ($1/1000):2 w l lw 2 t "under stress-ng --cpu"
    } else {
        plot raw."/q4_takeover_late.dat" u ($1/1000):2 w l lw 2 t "no added load"
    }
    unset logscale x
}

# 5. death to new holder
if (fexists(raw . "/q5_death_fl.dat")) {
    set output out . "/q5_death.png"
    set title "Q5 from SIGKILL of the holder to a waiter holding the lock (CDF)"
    set logscale x
    set xlabel "µs"
    plot raw."/q5_death_fl.dat" u ($1/1000):2 w l lw 2 t "fencelock (life word or fencelockd, OWNER_DIED)", \
         raw."/q5_death_fl_nosup.dat" u ($1/1000):2 w l lw 2 t "fencelock, fencelockd stopped (life word)", \
         raw."/q5_death_mutex.dat" u ($1/1000):2 w l lw 2 t "robust mutex (EOWNERDEAD)"
    unset logscale x
}

# 6. scale
if (fexists(raw . "/q6_keys.dat")) {
    set output out . "/q6_keys.png"
    set title "Q6 acquire+release against the number of keys in the region"
    set xlabel "keys"
    set ylabel "ns per acquire+release"
    set autoscale y
    set logscale x
    set logscale y
    set key top left
    plot raw."/q6_keys.dat" u 1:2 w lp lw 2 t "random key, median", \
         "" u 1:3 w lp lw 2 dt 2 t "random key, p99", \
         "" u 1:4 w lp lw 2 t "one hot key, median"
    unset logscale x
    unset logscale y
}
if (fexists(raw . "/q6_waiters.dat")) {
    set output out . "/q6_waiters.png"
    set multiplot layout 1,2 title "Q6 processes on one key: lock, 20 us work, unlock, sleep 100 us"
    set title "throughput"
    set xlabel "processes"
    set ylabel "acquisitions per second"
    set autoscale y
    set yrange [0:*]
    set logscale x 2
    set key bottom right
    plot raw."/q6_waiters.dat" u 1:2 w lp lw 2 t "fencelock", "" u 1:6 w lp lw 2 t "robust mutex"
    set title "CPU per acquisition, less the work"
    set ylabel "µs"
    set key top left
    plot raw."/q6_waiters.dat" u 1:($5/1000) w lp lw 2 t "fencelock (wakes all)", \
         "" u 1:($9/1000) w lp lw 2 t "robust mutex (wakes one)"
    unset multiplot
}
