/*
 * flaked.pml: a Promela model of flaked's coordination protocol, checked
 * exhaustively by SPIN (scripts/model runs every configuration). What each
 * part stands for, what is abstracted and why that is sound: docs/model.md.
 *
 * One process runs the whole system as a loop of atomic steps: each script
 * call is one step (Redis runs a script atomically), each environment fault
 * is one step, and a node's use of what it was granted is a step of its
 * own. Any interleaving of these steps is explored, so a process that
 * stops taking steps for a while (a pause, a slow connection) needs no
 * step of its own.
 *
 * Time is counted in ticks; one tick stands for one second, the unit in
 * which the scripts' margins are stated (redisSkewMs = 1 s). Counter values
 * are tick * SEQ + seq (one sequence bit), as counter.lua computes them.
 *
 * Configurations (-D, scripts/model): CFG_LOSS (one server and its
 * snapshot: restarts from it or empty), CFG_FAILOVER (a master and a
 * replica holding a prefix of its writes; a failover), CFG_SPLIT (the
 * replica is promoted while the old master, cut off from it, still accepts
 * writes from some nodes), CFG_REPL (a master and two replicas that
 * attach, detach, resync and are promoted one after another; SENTINEL adds
 * three Sentinels, their failovers and the Sentinel rule, FORCED adds
 * SENTINEL FAILOVER). Switches: WAITSW (a grant is used only after WAIT
 * n, n the replicas' high-water mark), MINREP (the old master refuses writes LAG ticks
 * after the cut: min-replicas-to-write 1), LAYOUT (a node of another
 * layout; STRAY_SILENT asserts it never issues), MIXED (the fleet in
 * counter mode, the last slot in flake mode), CLONE (a process started
 * from a copy of a node's state file), REGIONS (two regions' counters).
 * BUG_x brings back one bug of the teeth list.
 *
 * The registry ({ns}:meta and {ns}:layout A) is there at the start, made
 * by flaked init (init.lua: a possible loss recorded at its time).
 * Only a process that has run under it (pknown: a claim or a counter
 * segment granted, or a state file of its layout at start) restores a
 * registry Redis lost; any other gets NOREGISTRY and writes nothing
 * past the guard (guard.lua's fleetLayout).
 */

#ifndef M
#define M 2            /* machine IDs 0..M-1 */
#endif
#ifndef TMAX
#define TMAX 6         /* the last tick of global time */
#endif
#ifndef H
#define H 2            /* the fleet's horizon (reserve-ahead + max-lead + max-skew) */
#endif
#ifndef SK
#define SK 1           /* redisSkewMs: 1 s, one tick (SK=2: ticks of half a second) */
#endif
#ifndef CLK
#define CLK SK         /* how far apart the servers' clocks are (CFG_REPL): within SK */
#endif
#ifndef LEAD
#define LEAD 1         /* the counter's lead */
#endif
#define SEQ 2          /* counter values per tick (one sequence bit) */
#ifndef SEG
#define SEG 2          /* counter segment size */
#endif
#ifndef MAXTOK
#define MAXTOK 4      /* claims in a run: tokens are fresh numbers up to it */
#endif
#ifndef MAXF
#define MAXF 2         /* fault budget: losses, failovers, restarts, clones */
#endif
#ifndef LAG
#define LAG 3          /* min-replicas-max-lag (MINREP) */
#endif
#ifdef FORCED
#define INITAGO SK     /* flaked init ran a second before the run: its loss floor does not cover the first ticks */
#else
#define INITAGO 0      /* flaked init ran at the start */
#endif
#ifndef MAXP
#define MAXP MAXF      /* promotions (CFG_REPL), within the fault budget */
#endif
#ifndef P
#define P 2            /* process slots; slot p runs node p (CLONE: the last slot copies node 0's file) */
#endif

/* servers: two (CFG_LOSS: the server and its snapshot; CFG_FAILOVER and
 * CFG_SPLIT: a master and its replica), or NS with CFG_REPL (a master and
 * NS-1 replicas) */
#ifdef CFG_REPL
#ifndef NS
#define NS 3
#endif
#else
#define NS 2
#endif

#define NONE -2       /* a missing key or field (claim.lua reads a missing reservation as -2 and writes -1) */
#define MAXV 31        /* counter values are tracked in a 32-bit mask */

/* ---- Redis: the servers' data (index 0 .. NS-1) ---- */
byte lease[NS*M];    /* lease token, 0: none */
short resv[NS*M];    /* {ns}:reserved, NONE: no field */
bit meta[NS];        /* {ns}:meta exists */
byte msrv[NS];       /* meta server: the identity it was last written under */
#ifdef WAITSW
byte msrep[NS];      /* the master_replid part of it (replicasAfterChange) */
byte mset[NS];       /* meta replica_set: the replicas listed since this identity took it over,
                        a bit per server (the scripts key them by address, one per server) */
#endif
short mloss[NS];     /* meta loss_ms, in ticks */
byte mlid[NS];       /* meta loss_id, abstracted to a fresh number per loss */
byte mgen[NS];       /* meta generation */
bit mres[NS];        /* meta reserved: a claim wrote {ns}:reserved (guard.lua reads it gone as a loss) */
byte mhw[NS];        /* meta replicas: the high-water mark (WAITSW) */
byte lay[NS];        /* {ns}:layout: 0 none, 1 the fleet's (A), 2 another (B) */
short ctr[NS];       /* {ns}:counter, NONE: missing */
#ifdef REGIONS
short ctr2[NS];      /* region 1's counter key */
#endif

/* ---- the servers as processes ---- */
byte ident[NS];      /* run_id:master_replid, abstracted to a fresh number */
#ifdef WAITSW
byte rid[NS];        /* master_replid alone (a replica has its master's once synced) */
byte rid2[NS];       /* master_replid2: the replid it had before its promotion, 0: none */
byte nrid;           /* fresh replids */
#endif
short off[NS];       /* TIME = now - off: the servers' clocks within SK */
bit acc[NS];         /* accepting writes (a master, up, reachable) */
byte mst;            /* the master Sentinel knows */
#ifdef CFG_REPL
/* NS servers: any may be a master (several during a split brain), a
 * replica following one, or down */
byte role[NS];       /* 0 down, 1 master, 2 replica */
byte rof[NS];        /* the master a replica follows */
byte proms;          /* promotions so far (at most MAXP, within MAXF) */
#ifdef REPL_LATE
bit joined;          /* the last replica, away at flaked init, has attached */
#endif
#if defined(REPL_LATE) && !defined(REPL_TURNS)
#define JOINED joined
#else
#define JOINED 1
#endif
bit rlnk[NS];        /* a replica's link to it is up (it streams and acknowledges) */
#else
bit lnk;             /* the replica's link to its master is up */
byte repof;          /* the server the replica (1 - repof) follows */
bit listed[2];       /* connected_slaves the server lists (until repl-timeout) */
#endif
bit split;           /* two masters accepting writes */
short cutT;          /* when the split began */

short now;
short mloss0;        /* the loss flaked init recorded */
byte faults;
bit cloned;          /* the clone slot started from a copy (once) */
byte nid;            /* fresh identities */
byte nlid;           /* fresh loss IDs */
byte ntok;           /* fresh tokens */
byte ngen;           /* fresh generations */

/* ---- processes ---- */
bit up[P];
byte pconn[P];       /* the server it talks to */
byte pmid[P];        /* machine ID held + 1, 0: none */
byte ptok[P];
short pfloor[P];     /* last tick it must not use */
short presv[P];      /* the reservation it holds (may use up to) */
short plast[P];      /* last tick it issued (any machine ID) */
byte plid[P];        /* loss ID at its last claim or renewal */
byte pgen[P];
byte play[P];        /* its layout: 1 (A) or 2 (B) */
bit pknown[P];       /* it has run under the registry: it restores a lost one */
short pvlast[P];     /* last counter value it used */
#ifdef WAITSW
byte ppend[P];       /* a grant awaiting WAIT: 1 claim, 2 renew, 3 counter */
byte pn[P];          /* the n it must WAIT for */
byte pps[P];         /* the server it was granted on */
short pa[P]; short pb[P]; byte pc[P]; short pd[P]; byte pe[P]; byte pg[P]; byte pi[P];   /* the pending grant */
#endif

#ifdef SENTINEL
/* ---- Sentinel (with CFG_REPL): NSEN Sentinels, down-after DA ticks.
 * Each reports the master it knows (sview), up until it has been out of
 * contact with it for DA ticks (slost: 0 in contact, else 1 + the ticks
 * since it lost contact, counted up to DA + 1), and whether a failover it
 * leads is in progress (sfip). Ages, not times, so that states differing
 * only in when something happened long ago are one. ---- */
#ifndef NSEN
#define NSEN 3
#endif
#ifndef DA
#define DA 1
#endif
byte sview[NSEN];
byte slost[NSEN];
bit sfip[NSEN];      /* a failover it leads is in progress: from its start until it ends (the
                        Sentinel learns the master it promoted, SLEARN) */
bit psen[P];         /* the pending grant was made right after a check every Sentinel passed */
#ifdef CHECK_BEFORE
byte pchk[P];        /* the ticks, this one included, for which the node's last check of the
                        master it talks to vouches: 0 none (a node that moves to another master
                        checks again) */
#endif
#endif

/* state files, one per slot (a clone slot gets a copy of node 0's) */
byte sftok[P];
short sfmid[P];      /* preferred machine ID, NONE: none */
short sffloor[P];

/* ---- what was issued ---- */
/* The uniqueness invariants watch one ID each, chosen by the search when
 * it is first issued: an ID issued twice is caught by the run that watched
 * it from its first issue, and the search runs every choice. So the state
 * holds three numbers instead of the set of every ID issued. */
bit wset;            /* a flake ID is watched */
byte wcell;          /* its cell of the fleet's ID space (machine ID of layout A) */
byte wtick;          /* its tick */
bit cset;            /* a counter value is watched */
byte ccm;            /* its cell: the counter machine ID's (CCELL) */
byte cval;           /* the value */

#define RT(ws) (now - off[ws])
#define MAX(a,b) ((a) > (b) -> (a) : (b))
#define MIN(a,b) ((a) < (b) -> (a) : (b))
#define LF(ws) (mloss[ws] + SK + H)     /* claim.lua's loss floor */
#define REP (1 - repof)

/* the ID-space cell of machine ID m in layout l: the fleet's (A) machine
 * IDs are cells 0..M-1 and its counter machine ID cell M (CCELL);
 * another layout's (B) machine ID m overlaps the fleet's cell m+1, so its
 * last one overlaps the fleet's counter machine ID (one sequence bit moved
 * into the machine ID, the simulator's stray) */
#define CELL(xm, l) ((l) == 1 -> (xm) : ((xm) + 1))
#define CCELL M
#define CCELL1 (M + 1)   /* region 1's counter machine ID (REGIONS) */

/* ---- Redis data as a whole: replication, snapshots ---- */
#if defined(CFG_REPL) && defined(WAITSW)
/* A replica's copy of replica_set is read only if it is promoted in place
 * of a master other than the one whose replid its {ns}:meta stores (a
 * promotion in place of that one deletes it at its first script,
 * replicasAfterChange), or if, promoted, it restarts or is copied to a
 * replica promoted in turn before that first script. A replica's replid
 * changes only with a full copy, so the copy is cleared when it stores
 * the replid the replica follows and the faults left allow neither (two
 * promotions, or a promotion and a restart): states differing only in it
 * are one. */
#ifdef REPL_RESTART
#define SETREAD (faults + 2 <= MAXF && proms + 1 <= MAXP)
#else
#define SETREAD (faults + 2 <= MAXF && proms + 2 <= MAXP)
#endif
#define DEADSET(D_) if :: role[D_] == 2 && msrep[D_] == rid[D_] && !SETREAD -> mset[D_] = 0 :: else -> skip fi
#define DEADSETS DEADSET(0); DEADSET(1); DEADSET(2)
#else
#define DEADSET(D_) skip
#define DEADSETS skip
#endif
inline copydata(D_, S_) {
  for (xi : 0 .. M-1) {
    lease[D_*M+xi] = lease[S_*M+xi]; resv[D_*M+xi] = resv[S_*M+xi]
  }
  meta[D_] = meta[S_]; msrv[D_] = msrv[S_]; mloss[D_] = mloss[S_]; mlid[D_] = mlid[S_];
  mgen[D_] = mgen[S_]; mhw[D_] = mhw[S_]; mres[D_] = mres[S_]; lay[D_] = lay[S_]; ctr[D_] = ctr[S_];
#ifdef REGIONS
  ctr2[D_] = ctr2[S_];
#endif
#ifdef WAITSW
  msrep[D_] = msrep[S_]; mset[D_] = mset[S_]; DEADSET(D_);
#endif
  xi = 0
}

inline cleardata(D_) {
  for (xi : 0 .. M-1) { lease[D_*M+xi] = 0; resv[D_*M+xi] = NONE }
  meta[D_] = 0; msrv[D_] = 0; mloss[D_] = 0; mlid[D_] = 0; mgen[D_] = 0; mhw[D_] = 0; mres[D_] = 0;
  lay[D_] = 0; ctr[D_] = NONE;
#ifdef REGIONS
  ctr2[D_] = NONE;
#endif
#ifdef WAITSW
  msrep[D_] = 0; mset[D_] = 0;
#endif
  xi = 0
}

/* ---- a loss: Redis goes back to an earlier copy of its data ----
 * Instead of holding a copy made at every possible moment (which doubles
 * the state), the copy a restart or promotion brings back is drawn key by
 * key: each lease back to no one or to any token handed out so far, each
 * reservation missing or lower, the counter missing or lower, {ns}:meta
 * and {ns}:layout kept, the layout gone, or both gone (a total loss).
 * Every prefix of the writes is among these (or differs only in reservations higher than the loss floor, which no
 * claim after the loss starts below: docs/model.md), and many states that
 * no prefix holds: the check covers more than can happen. */
inline havoc(S_) {
  for (xi : 0 .. M-1) {
    if
    :: skip
    :: lease[S_*M+xi] = 0
    :: ntok > 0 -> select(xq : 1 .. ntok); lease[S_*M+xi] = xq
    fi;
    if
    :: skip
    :: resv[S_*M+xi] = NONE
    :: resv[S_*M+xi] > 0 -> resv[S_*M+xi] = resv[S_*M+xi] - 1
    fi;
    printf("EV DATA %d %d %d %d\n", S_, xi, lease[S_*M+xi], resv[S_*M+xi])
  }
  if
  :: skip
  :: ctr[S_] = NONE
  :: ctr[S_] >= 1 -> ctr[S_] = ctr[S_] - 1
  :: ctr[S_] >= SEQ -> ctr[S_] = ctr[S_] - SEQ
  fi;
  /* {ns}:layout is written only with or after {ns}:meta (init.lua,
   * fleetLayout after the guard) and neither is ever deleted: a copy
   * without {ns}:meta has no {ns}:layout (a total loss) */
  if
  :: skip
  :: lay[S_] = 0
  :: meta[S_] = 0; msrv[S_] = 0; mloss[S_] = 0; mlid[S_] = 0; mgen[S_] = 0; mhw[S_] = 0; mres[S_] = 0;
     lay[S_] = 0;
#ifdef WAITSW
     msrep[S_] = 0; mset[S_] = 0;
#endif
     skip
  fi;
  printf("EV DATAX %d %d %d %d\n", S_, ctr[S_], meta[S_], lay[S_]);
  xi = 0; xq = 0
}

/* the data a promoted replica D_ holds: with WAIT, exactly what it
 * replicated; without, any prefix of its master S_'s writes */
#ifdef WAITSW
#define PREFIX(D_, S_) skip
#else
#define PREFIX(D_, S_) copydata(D_, S_); havoc(D_)
#endif

/* replids: a promoted replica takes a new one and shows the one it had
 * (its master's) as master_replid2; a replica takes its master's when it
 * syncs; a restart takes a new one, with no master_replid2 */
#if defined(WAITSW) && !defined(SENTINEL_ONLY)
#define RIDPROMOTE(S_) rid2[S_] = rid[S_]; nrid++; rid[S_] = nrid
#define RIDFOLLOW(D_, S_) rid[D_] = rid[S_]
#define RIDRESTART(S_) nrid++; rid[S_] = nrid; rid2[S_] = 0
#else
#define RIDPROMOTE(S_) skip
#define RIDFOLLOW(D_, S_) skip
#define RIDRESTART(S_) skip
#endif

/* {ns}:reserved gone while {ns}:meta says a claim wrote it (evicted or
 * deleted): guard.lua reads it as a loss at this moment */
#if M > 2
#define RESGONE(S_) (mres[S_] && resv[(S_)*M] == NONE && resv[(S_)*M+1] == NONE && resv[(S_)*M+2] == NONE)
#else
#define RESGONE(S_) (mres[S_] && resv[(S_)*M] == NONE && resv[(S_)*M+1] == NONE)
#endif

#ifdef BUG_allkeys
#undef RESGONE
#define RESGONE(S_) (0)   /* and the reserved marker not read: evictions unnoticed */
#endif

/* ---- guard.lua ---- */
/* K_: the caller has run under the registry (it sends a generation). Only
 * such a caller restores a registry Redis lost (xnoreg = 0); any other is
 * refused (NOREGISTRY, xnoreg = 1) before the guard writes anything. */
#ifdef BUG_restore_by_stranger
#define KNOWS(K_) (1)      /* the bug: anyone restores (makes) the registry */
#else
#define KNOWS(K_) (K_)
#endif

/* connected_slaves: the replicas server S_ lists */
#ifdef CFG_REPL
/* a master lists exactly the replicas streaming from it: listing one for
 * repl-timeout after its link broke only raises the count a grant waits
 * for (a listed replica that cannot acknowledge fails the WAIT), so
 * dropping it at once explores every grant that a longer listing allows */
#define STREAMS(r, S_) (role[r] == 2 && rlnk[r] && rof[r] == (S_))
#define LISTED(S_) (STREAMS(0, S_) + STREAMS(1, S_) + STREAMS(2, S_))
/* the replicas S_ lists, a bit per server (replica_set) */
#define LISTSET(S_) (STREAMS(0, S_) + STREAMS(1, S_) * 2 + STREAMS(2, S_) * 4)
#else
#define LISTED(S_) (listed[S_])
#define LISTSET(S_) (listed[S_] << (1 - (S_)))   /* the other server */
#endif
/* the replicas in a replica_set */
#define SETSIZE(b) (((b) & 1) + (((b) >> 1) & 1) + (((b) >> 2) & 1))

/* replicasAfterChange: the mark once server S_ took {ns}:meta over from
 * the identity stored: one less when S_ is a replica promoted in place of
 * that server (its master_replid2 is the replid stored), with the replicas
 * listed since counted anew (S_ was one of them), the same after a restart;
 * never below the replicas listed now */
#if defined(WAITSW) && !defined(SENTINEL_ONLY)
#if defined(BUG_mark_reset)
/* the bug (DESIGN-26 as written): reset to the replicas listed now */
#define MARKDEC(S_) (mhw[S_])
#elif defined(BUG_mark_dec_always)
/* the bug: one less on any new identity, a restart too */
#define MARKDEC(S_) (1)
#elif defined(MARK_KEEP)
/* a design to compare: the mark kept whole across a promotion too */
#define MARKDEC(S_) (0)
#elif defined(BUG_mark_dec_any)
/* the bug: one less for any promoted replica, whichever master wrote last */
#define MARKDEC(S_) (rid2[S_] != 0)
#else
#define MARKDEC(S_) (rid2[S_] != 0 && rid2[S_] == msrep[S_])
#endif
inline afterChange(S_) {
  xd = MARKDEC(S_);
  if :: mhw[S_] > xd -> mhw[S_] = mhw[S_] - xd :: else -> mhw[S_] = 0 fi;
  mhw[S_] = MAX(mhw[S_], LISTED(S_));
  if :: xd != 0 -> mset[S_] = 0 :: else -> skip fi;
  msrep[S_] = rid[S_]
}
/* a {ns}:meta restored after Redis lost it has no replica_set */
#define CLRSET(S_) mset[S_] = 0
#else
#define afterChange(S_) skip
#define CLRSET(S_) skip
#endif

/* a fresh loss ID: only renewals read it (flake mode) */
#ifdef FLAKE
#define NEWLID(S_) nlid++; mlid[S_] = nlid
#else
#define NEWLID(S_) skip
#endif

/* how: 0 same server, 1 created, 2 server changed */
inline guard(S_, G_, K_) {
  xnoreg = 0;
  if
  :: !meta[S_] && !KNOWS(K_) -> xnoreg = 1; xhow = 0
  :: !meta[S_] && KNOWS(K_) ->
     meta[S_] = 1; msrv[S_] = ident[S_]; mloss[S_] = RT(S_); NEWLID(S_);
     if :: G_ == 0 -> ngen++; mgen[S_] = ngen :: else -> mgen[S_] = G_ fi; xhow = 1;
     /* the mark starts from the replicas listed */
     mhw[S_] = 0; CLRSET(S_); afterChange(S_)
  :: meta[S_] && msrv[S_] == ident[S_] && !RESGONE(S_) -> xhow = 0
  :: else ->
     /* reservations gone under the same server: the next claim writes both again */
     if :: msrv[S_] == ident[S_] -> mres[S_] = 0 :: else -> skip fi;
     mloss[S_] = MAX(mloss[S_], RT(S_)); msrv[S_] = ident[S_]; NEWLID(S_); xhow = 2;
     afterChange(S_)
  fi
}

/* replicas.lua, at the end of a grant (claim, renewal, counter segment):
 * the replicas listed added to the replica_set, the mark raised to the
 * replicas listed and to the size of the set (two replicas listed in
 * turns, never together, count two: a grant only one of them acknowledged
 * is missing from the other once promoted), and the count the grant must
 * reach (xn), floored by the operator's --min-replicas (WAIT_MIN, which
 * internal/replwait applies) */
#ifdef SENTINEL_ONLY
/* (the mark plays no part) */
#define needed(S_) xn = 0
#elif defined(WAITSW)
#ifdef BUG_replica_set_ignored
/* the bug: the replicas listed at once counted, not those listed since */
#define RAISESET(S_) skip
#define SETCOUNT(S_) 0
#else
#define RAISESET(S_) mset[S_] = mset[S_] | LISTSET(S_)
#define SETCOUNT(S_) SETSIZE(mset[S_])
#endif
inline needed(S_) {
  RAISESET(S_);
#ifndef BUG_mark_unraised
  mhw[S_] = MAX(mhw[S_], MAX(LISTED(S_), SETCOUNT(S_)));
#endif
#ifdef BUG_wait_listed
  xn = LISTED(S_);        /* the bug: the replicas listed now, not the mark */
#else
  xn = MAX(mhw[S_], LISTED(S_));
#endif
  printf("EV NEED %d %d\n", S_, xn);    /* (the replay: the script's count) */
#ifdef WAIT_MIN
#ifndef BUG_floor_ignored
  xn = MAX(xn, WAIT_MIN);
#endif
#endif
  skip
}
#endif

#ifdef SENTINEL
/* Sentinel k reports its master up: in contact, or out of contact for
 * less than the down-after time */
#define SUP(k) (slost[k] <= DA)
#define SDOWN(k) (slost[k] > DA)
/* the Sentinel rule (internal/replwait, WindowOf): every Sentinel names
 * S_, the server that ran the grant (its run ID), with flags "master"
 * alone (not down, no failover in progress) */
#if defined(BUG_sentinel_run_id_unchecked)
#define PASS1(k, S_) (SUP(k) && !sfip[k])          /* the bug: any master */
#elif defined(BUG_sentinel_failover_ignored)
#define PASS1(k, S_) (sview[k] == (S_) && SUP(k))  /* the bug: a failover in progress ignored */
#else
#define PASS1(k, S_) (sview[k] == (S_) && SUP(k) && !sfip[k])
#endif
#ifdef BUG_sentinel_quorum
/* the bug: a majority of the Sentinels, not all */
#define PASS(S_) (PASS1(0, S_) + PASS1(1, S_) + PASS1(2, S_) >= 2)
#else
#define PASS(S_) (PASS1(0, S_) && PASS1(1, S_) && PASS1(2, S_))
#endif
/* How long a check vouches (CHECK_BEFORE): MaxCheckAge (100 ms) and
 * Sentinel k's down-after bound (DA less the age of its pending PING),
 * the earlier of them. In ticks of 1 s MaxCheckAge is this tick alone,
 * which also ends before any down-after bound (a Sentinel that reports
 * the master up goes down at a tick's start at the earliest). */
#if defined(BUG_sentinel_no_max_check_age)
/* the bug: the down-after bound alone, the ticks before the first
 * Sentinel can find the master down */
#define WIN(k) (slost[k] == 0 -> DA : DA + 1 - slost[k])
#define CHKWIN MIN(WIN(0), MIN(WIN(1), WIN(2)))
#else
#define CHKWIN 1
#endif
/* the grant on S_ of process p is vouched for: its check every Sentinel
 * passed, in the same atomic step, or (CHECK_BEFORE) one sent before it
 * that still vouches, or else the second check the node sends after the
 * grant's reply (internal/replwait), which needs every Sentinel naming
 * the master up with no failover and no down-after bound: the same test
 * in the grant's step (within MaxCheckAge, which in ticks is that tick). (The second check's answers come later: one that finds
 * the Sentinels clean again after a change with no promotion, a Sentinel
 * back from s_down, vouches where this does not; no promotion came
 * between, so the grant stays below the floors.) */
#ifdef CHECK_BEFORE
#define VOUCH(p, S_) (pchk[p] != 0 || PASS(S_))
#else
#define VOUCH(p, S_) (PASS(S_))
#endif
#define SENCHECK(p, S_) psen[p] = VOUCH(p, S_)
#else
#define SENCHECK(p, S_) skip
#endif

/* COUNTED (an assumption of the rule, docs/model.md): a granting script
 * runs on a master right after a replica attached to it (its grant not
 * used), so the mark counts the replica before anything else happens */
#ifdef COUNTED
#define COUNT(S_) guard(S_, mgen[S_], 1); if :: !xnoreg -> needed(S_) :: else -> skip fi; printf("EV COUNTED %d\n", S_)
#else
#define COUNT(S_) skip
#endif

/* ---- guard.lua: fleetLayout, after the guard ----
 * A missing {ns}:layout is restored with the caller's layout by a caller
 * that has run under the registry, and refused (NOREGISTRY) to any other:
 * the guard's writes stay (Redis keeps a script's writes before an
 * error). The caller compares lay[S_] with its own layout after it. */
inline fleetLayout(S_, Y_, K_) {
  if
  :: lay[S_] == 0 && KNOWS(K_) -> lay[S_] = Y_
  :: lay[S_] == 0 && !KNOWS(K_) -> xnoreg = 1
  :: else -> skip
  fi
}

/* the caller's layout differs from the one stored: refused (LAYOUT) */
#ifdef BUG_layout_unchecked
#define LAYOUTDIFF(S_, p) (0)   /* the bug: any stored layout accepted */
#else
#define LAYOUTDIFF(S_, p) (lay[S_] != play[p])
#endif

/* ---- issue: the invariants ---- */
inline issue(P_, T_) {
#ifdef STRAY_SILENT
  assert(play[P_] == 1);               /* a node of another layout never issues */
#endif
  xc = CELL(pmid[P_] - 1, play[P_]);
  /* no (machine ID, tick) issued by two processes: a process enters a
   * tick at sequence 0, so two in one tick share (machine ID, tick, 0) */
  assert(!(wset && wcell == xc && wtick == T_));
  /* nor a tick of the fleet's counter machine ID (the stray's last
   * machine ID overlaps it): the generator may issue every sequence of
   * the tick, so any counter value in it is a duplicate */
  assert(!(cset && ccm == xc && cval / SEQ == T_));
  /* each process strictly increasing */
  assert(T_ > plast[P_]);
  if
  :: !wset -> wset = 1; wcell = xc; wtick = T_
  :: true -> skip
  fi;
  printf("EV ISSUE %d %d %d\n", P_, xc, T_);
  plast[P_] = T_
}

inline usecounter(P_, C_, F_, E_) {
#ifdef STRAY_SILENT
  assert(play[P_] == 1);               /* a node of another layout never issues */
#endif
  assert(F_ > pvlast[P_]);             /* each process strictly increasing */
  /* every counter value handed out once */
  assert(!(cset && ccm == C_ && cval >= F_ && cval <= E_));
  /* and none in a tick a flake ID of the same cell was issued in */
  assert(!(wset && wcell == C_ && wtick >= F_ / SEQ && wtick <= E_ / SEQ));
  if
  :: !cset -> select(xv : F_ .. E_); cset = 1; ccm = C_; cval = xv
  :: true -> skip
  fi;
  printf("EV USE %d %d %d %d\n", P_, C_, F_, E_);
  pvlast[P_] = E_
}

/* Dead values are reset, so that states differing only in them are one:
 * a process that lost its lease keeps only its last tick and counter
 * value; one that ended keeps nothing (its state file stays). */
#ifdef WAITSW
#ifdef SENTINEL
#define CLRSEN(p) psen[p] = 0
#else
#define CLRSEN(p) skip
#endif
#define CLRPEND(p) ppend[p] = 0; pn[p] = 0; pps[p] = 0; pa[p] = 0; pb[p] = 0; pc[p] = 0; pd[p] = 0; pe[p] = 0; pg[p] = 0; pi[p] = 0; CLRSEN(p)
#else
#define CLRPEND(p) skip
#endif
#define LOSE(p) pmid[p] = 0; ptok[p] = 0; pfloor[p] = 0; presv[p] = 0; plid[p] = 0; pgen[p] = 0
#ifdef CHECK_BEFORE
#define CLRCHK(p) pchk[p] = 0
#else
#define CLRCHK(p) skip
#endif
#define DOWN(p) LOSE(p); up[p] = 0; pconn[p] = 0; plast[p] = NONE; pvlast[p] = NONE; pknown[p] = 0; CLRPEND(p); CLRCHK(p)

#ifdef REGIONS
#define REGION0(p) (p != P-1)
#else
#define REGION0(p) (1)
#endif

/* MIXED (with FLAKE and COUNTER): the last slot claims (flake mode), the
 * others use the counter (counter mode); otherwise every slot may do both */
#ifdef MIXED
#define FLAKEP(p) (p == P-1)
#define CTRP(p) (p != P-1)
#else
#define FLAKEP(p) (1)
#define CTRP(p) (1)
#endif

#ifdef CFG_REPL
#define ISMASTER(s) (role[s] == 1)
#define ISREPL(s) (role[s] == 2)
#ifdef REPL_FOLLOWED
/* (an assumption: only a replica of the newest master is promoted) */
#define PROMOTABLE(s) (role[s] == 2 && rof[s] == mst)
#else
#define PROMOTABLE(s) (role[s] == 2)
#endif
#define LINKED(r) (role[r] == 2 && rlnk[r])
#define ANY3(C) (C(0) || C(1) || C(2))
#define PICK3(C) if :: C(0) -> xo = 0 :: C(1) -> xo = 1 :: C(2) -> xo = 2 fi
/* server r, not streaming, may attach to master s: a replica to the
 * master it followed (it reconnects) or to the master Sentinel knows (it
 * re-points it there); a master other than that one only to it (Sentinel
 * turns an old master into a replica of the newest one) */
#ifdef SENTINEL_ONLY
/* (links play no part: only a re-pointing to the newest master) */
#define ATT(r, s) (role[s] == 1 && (s) == mst && (role[r] == 1 || rof[r] != (s)))
#else
#define ATT(r, s) (role[s] == 1 && \
  ((role[r] == 2 && !rlnk[r] && (rof[r] == (s) || (s) == mst)) || (role[r] == 1 && (s) == mst)))
#endif
#define ANYATTACH (ATT(0, 1) || ATT(0, 2) || ATT(1, 0) || ATT(1, 2) || ATT(2, 0) || ATT(2, 1))
#define PICKATTACH if :: ATT(0, 1) -> xo = 0; ws = 1 :: ATT(0, 2) -> xo = 0; ws = 2 \
  :: ATT(1, 0) -> xo = 1; ws = 0 :: ATT(1, 2) -> xo = 1; ws = 2 \
  :: ATT(2, 0) -> xo = 2; ws = 0 :: ATT(2, 1) -> xo = 2; ws = 1 fi
/* a replica becomes master: a new replid, the one it had (its master's)
 * as master_replid2 */
#define PROMOTE(r) faults++; proms++; role[r] = 1; acc[r] = 1; rlnk[r] = 0; \
  RIDPROMOTE(r); nid++; ident[r] = nid; printf("EV PROMOTED %d\n", r); PROMDATA(r); DEADSETS
#ifdef SENTINEL_ONLY
/* With the Sentinel rule alone no grant waits for a replica, so what a
 * replica holds is drawn when it is promoted, as in CFG_FAILOVER: any
 * prefix of what the master it followed holds (PREFIX, docs/model.md),
 * {ns}:meta's loss_ms as that master has it or as flaked init left it.
 * That the grants such a copy lacks are below the floors the promoted
 * replica's first script records is what the rule rests on, so the copy
 * is drawn, not assumed. A master turned replica keeps its data meanwhile
 * (what its own replicas draw from). */
#define REPLDATA(r, s) skip
#define PROMDATA(r) copydata(r, rof[r]); havoc(r); if :: meta[r] -> mloss[r] = mloss0 :: true -> skip fi
#else
/* a full sync: a copy of the master's data */
#define REPLDATA(r, s) copydata(r, s)
#define PROMDATA(r) skip
#endif
#ifdef SENTINEL
#if NSEN != 3
#error "SENTINEL models three Sentinels"
#endif
#define PICKQ(C) if :: C(0) -> xq = 0 :: C(1) -> xq = 1 :: C(2) -> xq = 2 fi
/* Sentinel k knows the newest master and finds it down */
#define ODOWN(k) (sview[k] == mst && SDOWN(k))
/* no failover in progress: Sentinel k may start one */
#define NOFIP (!sfip[0] && !sfip[1] && !sfip[2])
#define LEADOK(k) (ODOWN(k) && NOFIP)
#define FIPOK(k) (sview[k] == mst && NOFIP)
/* the failover Sentinel k leads has not promoted yet (its view still
 * names the master it replaces) */
#define FIPON(k) (sfip[k] && sview[k] == mst)
#define INCONTACT(k) (slost[k] == 0)
#define OUTCONTACT(k) (slost[k] != 0)
#define STALEVIEW(k) (sview[k] != mst)
#endif

/* The Sentinels are alike but for what they report: their records are
 * kept sorted, so that states differing only in which Sentinel reports
 * what are one (symmetry reduction) */
#ifdef SENTINEL
#define SKEY(k) (sview[k] * 32 + slost[k] * 2 + sfip[k])
#define SSWAP(a, b) if :: SKEY(a) > SKEY(b) -> \
    xi = sview[a]; sview[a] = sview[b]; sview[b] = xi; \
    xi = slost[a]; slost[a] = slost[b]; slost[b] = xi; \
    xi = sfip[a]; sfip[a] = sfip[b]; sfip[b] = xi :: else -> skip fi
#define SSORT SSWAP(0, 1); SSWAP(1, 2); SSWAP(0, 1); xi = 0
#endif

/* ages grow with time */
#ifdef SENTINEL
#ifdef CHECK_BEFORE
#define AGECHK for (xi : 0 .. P-1) { if :: pchk[xi] > 1 -> pchk[xi]-- :: else -> pchk[xi] = 0 fi }
#else
#define AGECHK skip
#endif
#define AGE() for (xi : 0 .. NSEN-1) { if :: slost[xi] != 0 && slost[xi] <= DA -> slost[xi]++ :: else -> skip fi }; AGECHK; SSORT
#else
#define AGE() skip
#endif

/* node p may move to master s */
#ifdef SENTINEL
/* (to a master some Sentinel reports: nodes find the master through them) */
#define MOVE(p, s) (up[p] && role[s] == 1 && pconn[p] != (s) && (sview[0] == (s) || sview[1] == (s) || sview[2] == (s)))
#else
#define MOVE(p, s) (up[p] && role[s] == 1 && pconn[p] != (s))
#endif
#define MOVES(p) (MOVE(p, 0) || MOVE(p, 1) || MOVE(p, 2))
#define PICKMOVE(p) if :: MOVE(p, 0) -> xo = 0 :: MOVE(p, 1) -> xo = 1 :: MOVE(p, 2) -> xo = 2 fi
#endif

#ifndef CFG_REPL
#define AGE() skip
#endif

/* a server takes writes from p */
#define CANWRITE(p) (acc[pconn[p]])

/* scratch variables of one atomic step: hidden, so not part of the state */
hidden byte xi, ws, xm, xc, xhow, xn, xnoreg, xg, xtok, xq, xd, xo;
hidden short xfl, wr, xv, xt, xcur, xfirst, xlast, xlim, xcap, xminv;
hidden byte xok;

/* a lease at (s, m) that can expire or be evicted */
#define LEASEAT(ws, xm) (acc[ws] && lease[(ws)*M+(xm)] != 0)
/* machine ID m is a candidate the claim script takes for p: free, or held
 * by the token of p's state file (a takeover of its previous process) */
#define ELIG(p, xm) (lease[pconn[p]*M+(xm)] == 0 || (sftok[p] != 0 && lease[pconn[p]*M+(xm)] == sftok[p]))
#if M > 2
#define ANYELIG(p) (ELIG(p, 0) || ELIG(p, 1) || ELIG(p, 2))
#define ANYLEASE(ws) (LEASEAT(ws, 0) || LEASEAT(ws, 1) || LEASEAT(ws, 2))
#else
#define ANYELIG(p) (ELIG(p, 0) || ELIG(p, 1))
#define ANYLEASE(ws) (LEASEAT(ws, 0) || LEASEAT(ws, 1))
#endif
#ifdef WAITSW
#define IDLE(p) (ppend[p] == 0)
#else
#define IDLE(p) (1)
#endif

/* ================= a process slot: a node's process ================= */
proctype Proc(byte p) {
end:
  do
  /* start, with the slot's state file (a clone slot may copy node 0's) */
  :: atomic { !up[p] ->
       up[p] = 1; pconn[p] = mst; pmid[p] = 0; plast[p] = NONE; pvlast[p] = NONE;
#ifdef WAITSW
       ppend[p] = 0;
#endif
#ifdef CLONE
       /* (a copy of a file of another layout is refused by the claim's
        * state file check: the clone slot runs the fleet's layout) */
       if
       :: p == P-1 && !cloned && play[p] == play[0] ->
          cloned = 1; sftok[p] = sftok[0]; sfmid[p] = sfmid[0]; sffloor[p] = sffloor[0];
          printf("EV CLONE %d 0\n", p)
       :: else -> skip
       fi;
#endif
       /* a state file is written only after a claim under the registry,
        * with its layout: the process knows the registry (coord.Registry.known) */
       pknown[p] = (sftok[p] != 0);
       printf("EV START %d %d\n", p, pconn[p]) }

#ifdef CHECK_BEFORE
  /* the node asks every Sentinel about its master (sent with the
   * script: any step may come between it and the grant); it keeps how
   * long a check they all passed vouches */
  :: atomic { up[p] && IDLE(p) && PASS(pconn[p]) && pchk[p] < CHKWIN ->
       pchk[p] = CHKWIN; printf("EV CHECK %d %d\n", p, pconn[p]) }
#endif

  /* crash (kill -9): nothing is released */
  :: atomic { up[p] -> DOWN(p); printf("EV KILL %d\n", p) }

#ifdef FLAKE
  /* claim.lua, taking any candidate the script would take (docs/model.md) */
  :: atomic { ntok < MAXTOK && FLAKEP(p) && up[p] && pmid[p] == 0 && CANWRITE(p) && IDLE(p) && ANYELIG(p) ->
       do
       :: ELIG(p, 0) -> xm = 0; break
       :: ELIG(p, 1) -> xm = 1; break
#if M > 2
       :: ELIG(p, 2) -> xm = 2; break
#endif
       od;
       ws = pconn[p];
       guard(ws, 0, pknown[p]);
       if :: !xnoreg -> fleetLayout(ws, play[p], pknown[p]) :: else -> skip fi;
       if
       :: xnoreg ->
          printf("EV CLAIM %d %d %d %d %d NOREG\n", p, ws, xm, play[p], pknown[p])
       :: !xnoreg && LAYOUTDIFF(ws, p) ->
          printf("EV CLAIM %d %d %d %d %d LAYOUT\n", p, ws, xm, play[p], pknown[p])
       :: else ->
#ifdef BUG_loss_floor_ignored
          xfl = MAX(resv[ws*M+xm], -1);
#else
          xfl = MAX(resv[ws*M+xm], LF(ws));
#endif
          if :: xm == sfmid[p] -> xfl = MAX(xfl, sffloor[p]) :: else -> skip fi;
#ifdef BUG_reclaim_below_reservation
          /* the preferred ID floored at the state file and the loss only */
          if :: xm == sfmid[p] -> xfl = MAX(LF(ws), sffloor[p]) :: else -> skip fi;
#endif
#ifdef BUG_state_file_token
          if :: sftok[p] != 0 -> xtok = sftok[p] :: else -> ntok++; xtok = ntok fi;
#else
          ntok++; xtok = ntok;
#endif
          lease[ws*M+xm] = xtok;
          if :: xfl > resv[ws*M+xm] -> resv[ws*M+xm] = xfl :: else -> skip fi;
          mres[ws] = 1;
          printf("EV CLAIM %d %d %d %d %d OK %d %d\n", p, ws, xm, play[p], pknown[p], xfl, xtok);
          pknown[p] = 1;     /* set at the reply, before any WAIT */
#if defined(SENTINEL_ONLY)
          /* used at once when vouched for (WAIT plays no part; using it
           * later only lets a crash come between) */
          if
          :: VOUCH(p, ws) ->
             pmid[p] = xm + 1; ptok[p] = xtok; pfloor[p] = xfl; presv[p] = xfl; plid[p] = mlid[ws];
             pgen[p] = mgen[ws];
             sftok[p] = xtok; sfmid[p] = xm; sffloor[p] = xfl
          :: else -> printf("EV UNVOUCHED %d\n", p)
          fi
#elif defined(WAITSW)
          needed(ws); SENCHECK(p, ws);
          ppend[p] = 1; pn[p] = xn; pps[p] = ws; pi[p] = ident[ws]; pa[p] = xfl; pc[p] = xtok; pd[p] = xm;
          pe[p] = mlid[ws]; pg[p] = mgen[ws]
#else
          pmid[p] = xm + 1; ptok[p] = xtok; pfloor[p] = xfl; presv[p] = xfl; plid[p] = mlid[ws];
          pgen[p] = mgen[ws];
          sftok[p] = xtok; sfmid[p] = xm; sffloor[p] = xfl
#endif
       fi }

  /* renew.lua: extend, and raise the reservation as far as allowed */
  :: atomic { up[p] && pmid[p] != 0 && CANWRITE(p) && IDLE(p) ->
       ws = pconn[p]; xm = pmid[p] - 1; xok = 1;
       /* an owner: it always sends its generation, so restores a lost registry */
       guard(ws, pgen[p], 1);
       fleetLayout(ws, play[p], 1);
       if
       :: LAYOUTDIFF(ws, p) -> xok = 0; printf("EV RENEW %d %d LOST layout\n", p, ws)
       :: else -> skip
       fi;
       /* after a possible loss nothing is extended, whatever is left of
        * the lease (a Redis restarted empty has none) */
#ifndef BUG_renew_across_loss
       if
       :: xok && mlid[ws] != plid[p] -> xok = 0; printf("EV RENEW %d %d LOST loss\n", p, ws)
       :: else -> skip
       fi;
#endif
       /* a lease gone (expired while the owner paused) is lost, never
        * re-asserted: the node claims again with its preferred ID */
       if
       :: xok && lease[ws*M+xm] == 0 ->
          xok = 0; printf("EV RENEW %d %d LOST expired\n", p, ws)
       :: xok && lease[ws*M+xm] != 0 && lease[ws*M+xm] != ptok[p] ->
          xok = 0; printf("EV RENEW %d %d LOST held\n", p, ws)
       :: else -> skip
       fi;
       if
       :: xok ->
          lease[ws*M+xm] = ptok[p];
          xcap = RT(ws) + H;
          wr = MAX(resv[ws*M+xm], MAX(presv[p], xcap));
          resv[ws*M+xm] = wr;
          printf("EV RENEW %d %d OK %d %d\n", p, ws, wr, RT(ws));
#if defined(SENTINEL_ONLY)
          if
          :: VOUCH(p, ws) -> presv[p] = wr; sffloor[p] = wr
          :: else -> printf("EV UNVOUCHED %d\n", p)
          fi
#elif defined(WAITSW)
          needed(ws); SENCHECK(p, ws);
          ppend[p] = 2; pn[p] = xn; pps[p] = ws; pi[p] = ident[ws]; pa[p] = wr
#else
          presv[p] = wr; sffloor[p] = wr
#endif
       :: else -> LOSE(p)
       fi }

  /* the generator issues the next tick above its floor and its last,
   * within its reservation. Only the next one: a generator that skips ticks
   * issues a subset of what this one issues, ending at the same last tick,
   * so every duplicate it could make this one makes too. */
  :: atomic { up[p] && pmid[p] != 0 &&
#ifdef BUG_issue_past_reservation
       presv[p] + 1 > MAX(pfloor[p], plast[p]) ->
#else
       presv[p] > MAX(pfloor[p], plast[p]) ->
#endif
       xt = MAX(pfloor[p], plast[p]) + 1;
       issue(p, xt) }

  /* release.lua on a clean stop, then the process ends */
  :: atomic { up[p] && CANWRITE(p) && IDLE(p) ->
       ws = pconn[p];
       if
       :: pmid[p] != 0 ->
          xm = pmid[p] - 1;
#ifdef BUG_release_below_used
          xt = pfloor[p];
#else
          xt = MAX(plast[p], pfloor[p]);
#endif
          guard(ws, pgen[p], 1);
          if
          :: lease[ws*M+xm] == ptok[p] -> lease[ws*M+xm] = 0; resv[ws*M+xm] = xt
          :: lease[ws*M+xm] != ptok[p] && xt > resv[ws*M+xm] -> resv[ws*M+xm] = xt
          :: else -> skip
          fi;
          sffloor[p] = xt;
          printf("EV RELEASE %d %d %d\n", p, ws, xt)
       :: else -> skip
       fi;
       DOWN(p); printf("EV STOP %d\n", p) }

#endif
#ifdef COUNTER
  /* counter.lua (REGIONS: the last slot is region 1's, below) */
  :: atomic { up[p] && CANWRITE(p) && IDLE(p) && REGION0(p) && CTRP(p) ->
       ws = pconn[p];
       guard(ws, 0, pknown[p]);
       if :: !xnoreg -> fleetLayout(ws, play[p], pknown[p]) :: else -> skip fi;
       xminv = pvlast[p] + 1;
       if
       :: xnoreg -> printf("EV COUNTER %d %d %d %d %d NOREG\n", p, ws, xminv, play[p], pknown[p])
       :: !xnoreg && LAYOUTDIFF(ws, p) -> printf("EV COUNTER %d %d %d %d %d LAYOUT\n", p, ws, xminv, play[p], pknown[p])
       :: else ->
             xfl = mloss[ws] + SK;        /* lossTick */
             if
             :: ctr[ws] != NONE ->
#ifdef BUG_counter_floor_time
                xcur = MAX(ctr[ws], RT(ws) * SEQ - 1)
#else
                xcur = MAX(MAX(ctr[ws], RT(ws) * SEQ - 1), (xfl + LEAD) * SEQ + SEQ - 1)
#endif
             :: else -> xcur = (MAX(RT(ws), xfl) + LEAD) * SEQ + SEQ - 1
             fi;
             xcur = MAX(xcur, xminv - 1);
             xfirst = xcur + 1; xlim = RT(ws) + LEAD;
             if
             :: xfirst / SEQ > xlim ->
                if :: ctr[ws] == NONE -> ctr[ws] = xcur :: else -> skip fi;
                printf("EV COUNTER %d %d %d %d %d AHEAD\n", p, ws, xminv, play[p], pknown[p])
             :: else ->
                xlast = xfirst + SEG - 1;
                if :: xlast / SEQ > xlim -> xlast = xlim * SEQ + SEQ - 1 :: else -> skip fi;
                ctr[ws] = xlast;
                printf("EV COUNTER %d %d %d %d %d OK %d %d\n", p, ws, xminv, play[p], pknown[p], xfirst, xlast);
                pknown[p] = 1;     /* fallback.Counter.known, set at the reply */
#if defined(SENTINEL_ONLY)
                if
                :: VOUCH(p, ws) -> usecounter(p, CCELL, xfirst, xlast)
                :: else -> printf("EV UNVOUCHED %d\n", p)
                fi
#elif defined(WAITSW)
                needed(ws); SENCHECK(p, ws);
                ppend[p] = 3; pn[p] = xn; pps[p] = ws; pi[p] = ident[ws]; pa[p] = xfirst; pb[p] = xlast
#else
                usecounter(p, CCELL, xfirst, xlast)
#endif
             fi
       fi }

#endif
#ifdef REGIONS
  /* region 1's counter (its own key), run by the last slot; its IDs carry
   * region 1's counter machine ID */
  :: atomic { p == P-1 && up[p] && CANWRITE(p) &&
       MAX(ctr2[pconn[p]], RT(pconn[p]) * SEQ - 1) + 1 <= (RT(pconn[p]) + LEAD) * SEQ + SEQ - 1 ->
       ws = pconn[p];
       xfirst = MAX(ctr2[ws], RT(ws) * SEQ - 1) + 1;
       ctr2[ws] = xfirst;
#ifdef BUG_counter_fleet_wide
       usecounter(p, CCELL, xfirst, xfirst)    /* the fleet-wide last machine ID: region 0's */
#else
       usecounter(p, CCELL1, xfirst, xfirst)
#endif
     }
#endif

#ifdef WAITSW
  /* WAIT n on the connection that ran the grant: the replica acknowledges
   * when it is attached to that server (and then holds all of its writes) */
  :: atomic { up[p] && ppend[p] != 0 ->
       ws = pps[p]; xc = 0;
#ifdef SENTINEL_ONLY
       /* (WAIT plays no part) */
       skip;
#elif defined(CFG_REPL)
       /* each replica streaming from that server acknowledges within the
        * timeout, or lags (or its link is down: it cannot) */
       if
       :: acc[ws] && ident[ws] == pi[p] ->
          for (xo : 0 .. NS-1) {
            if
            :: role[xo] == 2 && rlnk[xo] && rof[xo] == ws ->
               if
               :: copydata(xo, ws); xc++; printf("EV SYNC %d %d\n", ws, xo)
               :: skip
               fi
            :: else -> skip
            fi
          }; xo = 0
       :: else -> skip
       fi;
#else
       if
       :: lnk && repof == ws && acc[ws] && ident[ws] == pi[p] -> copydata(REP, ws); xc = 1; printf("EV SYNC %d %d\n", ws, REP)
       :: else -> skip
       fi;
#endif
       printf("EV WAIT %d %d %d\n", p, xc, pn[p]);
       if
#if defined(SENTINEL_ONLY)
       :: psen[p] ->             /* the Sentinel rule alone */
#elif defined(SENTINEL)
       :: xc >= pn[p] || psen[p] ->   /* the WAIT rule or the Sentinel rule */
#elif defined(BUG_wait_one_fewer)
       :: xc + 1 >= pn[p] ->     /* the bug: one replica fewer than the count */
#else
       :: xc >= pn[p] ->
#endif
          printf("EV WAITOK %d\n", p);
          if
          :: ppend[p] == 1 ->
             pmid[p] = pd[p] + 1; ptok[p] = pc[p]; pfloor[p] = pa[p]; presv[p] = pa[p];
             plid[p] = pe[p]; pgen[p] = pg[p];
             sftok[p] = pc[p]; sfmid[p] = pd[p]; sffloor[p] = pa[p]
          :: ppend[p] == 2 ->
             presv[p] = pa[p]; sffloor[p] = pa[p]
          :: ppend[p] == 3 -> usecounter(p, CCELL, pa[p], pb[p])
          fi
       :: else ->
          /* not acknowledged: treated as refused (a renewal keeps what it held) */
          printf("EV WAITFAIL %d\n", p)
       fi;
       CLRPEND(p) }
#endif
  od
}

/* ================= the environment ================= */
init {
  byte p;
  d_step {
    for (p : 0 .. NS-1) { cleardata(p); ident[p] = p + 1 };
    nid = NS; acc[0] = 1; mst = 0; now = SK;
#ifdef WAITSW
    /* a replica has its master's replid */
    for (p : 0 .. NS-1) { rid[p] = 1 }; nrid = 1;
#endif
#ifdef CFG_REPL
    /* server 0 the master, the others its replicas, streaming */
    role[0] = 1;
    for (p : 1 .. NS-1) { role[p] = 2; rof[p] = 0; rlnk[p] = 1 };
#else
    repof = 0;
#endif
#if defined(CFG_FAILOVER) || defined(CFG_SPLIT)
    lnk = 1; listed[0] = 1;
#endif
    for (p : 0 .. P-1) {
      up[p] = 0; pconn[p] = 0; pmid[p] = 0; plast[p] = NONE; pvlast[p] = NONE;
      play[p] = 1; sftok[p] = 0; sfmid[p] = NONE; sffloor[p] = NONE; pknown[p] = 0
    }
#ifdef LAYOUT
    play[P-1] = 2;
#endif
#ifdef SENTINEL
    for (p : 0 .. NSEN-1) { sview[p] = 0; slost[p] = 0; sfip[p] = 0 };
#endif
    p = 0
  }
  /* the servers' clocks: either may be up to SK behind the other */
#ifdef CFG_REPL
  /* (each 0 or CLK behind: any two within CLK; not all behind, which is
   * all on time with the run starting a tick earlier; the replicas are
   * alike at the start, so server 1's clock is not behind server 2's) */
  if
  :: off[0] = 0; off[1] = 0; off[2] = 0
  :: off[0] = 0; off[1] = 0; off[2] = CLK
  :: off[0] = 0; off[1] = CLK; off[2] = CLK
  :: off[0] = CLK; off[1] = 0; off[2] = 0
  :: off[0] = CLK; off[1] = 0; off[2] = CLK
#ifdef REPL_LATE
  /* (server 2 joins later: not alike) */
  :: off[0] = 0; off[1] = CLK; off[2] = 0
  :: off[0] = CLK; off[1] = CLK; off[2] = 0
#endif
  fi;
  printf("EV OFF %d %d %d\n", off[0], off[1], off[2]);
#else
  if
  :: off[0] = 0; off[1] = 0
  :: off[0] = 0; off[1] = SK
  :: off[0] = SK; off[1] = 0
  fi;
  printf("EV OFF %d %d\n", off[0], off[1]);
#endif
  /* flaked init makes the registry on server 0 before any node starts:
   * {ns}:meta with a possible loss at its time (init.lua), and the
   * fleet's layout */
  d_step {
    meta[0] = 1; msrv[0] = ident[0]; mloss[0] = RT(0) - INITAGO; mloss0 = mloss[0]; nlid = 1; mlid[0] = 1; ngen = 1; mgen[0] = 1;
    lay[0] = 1;
#ifdef WAITSW
    mhw[0] = LISTED(0); msrep[0] = rid[0];
#endif
#ifdef CFG_REPL
    /* the replicas hold the registry */
    for (p : 1 .. NS-1) { copydata(p, 0) }; p = 0;
    skip
  }
#ifdef REPL_LATE
  /* flaked init ran with both replicas streaming, or while the last one
   * was away (it attaches later: the mark counts it from the next grant) */
  if
  :: joined = 1
  :: d_step { rlnk[NS-1] = 0; mhw[0] = LISTED(0); copydata(1, 0); cleardata(NS-1) }
  fi;
#endif
  d_step {
#endif
#ifdef WAIT_NOFIRST
    /* the fleet ran with the replica attached before: {ns}:meta holds it
     * in its high-water mark, on the master and the replica */
    mhw[0] = 1; copydata(1, 0);
#endif
    skip
  }
#if defined(WAITSW) && !defined(WAIT_NOFIRST) && !defined(CFG_REPL)
  /* init ran while the replica was listed, or before it attached */
  if
  :: skip
  :: mhw[0] = 0
  fi;
  atomic { COUNT(0) };
#endif
#ifdef SENTINEL
  /* each Sentinel in contact with the master at the start, or out of
   * contact since some time before (down already, or soon) */
  atomic {
#ifndef FORCED_ONLY
    for (p : 0 .. NSEN-1) { select(xq : 0 .. DA + 1); slost[p] = xq };
#endif
    p = 0; xq = 0; SSORT
  };
#endif
#ifdef CFG_REPL
  /* (the replay: the replicas, which stream when init runs, what they hold) */
  printf("EV ATTACH 1 0\nEV ATTACH 2 0\n");
  if :: rlnk[2] -> skip :: else -> printf("EV DETACH 2\n") fi;
#endif
  printf("EV INIT 0 %d\n", INITAGO);
#ifdef CFG_REPL
  printf("EV SYNC 0 1\n");
  if :: rlnk[2] -> printf("EV SYNC 0 2\n") :: else -> skip fi;
#endif
  atomic {
    for (p : 0 .. P-1) { run Proc(p) }
    p = 0
  }

end:
  do
  :: atomic { now < TMAX -> now++; AGE(); printf("EV TIME %d\n", now) }

  /* a lease expires (a pause past the TTL) or is evicted (volatile-*) */
  :: atomic { ANYLEASE(0) || ANYLEASE(1) || (NS > 2 && ANYLEASE(NS-1)) ->
       if
       :: LEASEAT(0, 0) -> ws = 0; xm = 0
       :: LEASEAT(0, 1) -> ws = 0; xm = 1
       :: LEASEAT(1, 0) -> ws = 1; xm = 0
       :: LEASEAT(1, 1) -> ws = 1; xm = 1
#if M > 2
       :: LEASEAT(0, 2) -> ws = 0; xm = 2
       :: LEASEAT(1, 2) -> ws = 1; xm = 2
#endif
#if NS > 2
       :: LEASEAT(2, 0) -> ws = 2; xm = 0
       :: LEASEAT(2, 1) -> ws = 2; xm = 1
#endif
       fi;
       lease[ws*M+xm] = 0; printf("EV EXPIRE %d %d\n", ws, xm) }

#ifdef BUG_allkeys
  /* allkeys-*: any key may go ({ns}:reserved as a whole), the guard lets scripts
   * run and does not read the reserved marker (the bug) */
  :: atomic { acc[mst] && faults < MAXF -> faults++; ws = mst;
       if
       :: for (xi : 0 .. M-1) { resv[ws*M+xi] = NONE }; xi = 0; printf("EV EVICT %d reserved\n", ws)
       :: meta[ws] = 0; printf("EV EVICT %d meta\n", ws)
       :: ctr[ws] = NONE; printf("EV EVICT %d counter\n", ws)
       fi }
#endif

#ifdef CFG_LOSS
  /* server 1 is server 0's snapshot (RDB, AOF everysec, a backup): it
   * catches up at any moment, so it holds any prefix of the writes */
  /* a restart from a snapshot, an AOF written every second, a backup, or
   * with nothing */
  :: atomic { faults < MAXF -> faults++;
       printf("EV RESTART 0\n"); havoc(0);
       nid++; ident[0] = nid }
#endif

#if (defined(CFG_FAILOVER) || defined(CFG_SPLIT)) && defined(WAITSW)
  /* with WAIT the replica's data is held exactly (what it acknowledged must
   * be there): it catches up to its master at any moment */
  :: atomic { lnk && faults < MAXF -> copydata(REP, repof); printf("EV SYNC %d %d\n", repof, REP) }
#endif

#ifdef CFG_FAILOVER
  /* failover: the master dies, the replica (holding a prefix) is promoted */
  :: atomic { faults < MAXF && lnk -> faults++;
       ws = REP; acc[repof] = 0; acc[ws] = 1; nid++; ident[ws] = nid; mst = ws; RIDPROMOTE(ws);
       lnk = 0; listed[0] = 0; listed[1] = 0;
       printf("EV PROMOTE %d\n", ws); PREFIX(ws, repof);
#ifndef WAITSW
       cleardata(repof);   /* dead data; PREFIX draws the next replica's anew */
#endif
       skip }
  /* the old master comes back as a replica of the new one (full sync) */
  :: atomic { !lnk -> repof = mst; lnk = 1; listed[mst] = 1; RIDFOLLOW(REP, repof);
#ifdef WAITSW
       copydata(REP, repof);
#endif
       printf("EV SYNC %d %d\n", repof, REP) }
  /* a node reaches the new master (each at its own moment) */
  :: atomic { pconn[0] != mst -> pconn[0] = mst; printf("EV CONN 0 %d\n", mst) }
  :: atomic { pconn[1] != mst -> pconn[1] = mst; printf("EV CONN 1 %d\n", mst) }
#if P > 2
  :: atomic { pconn[2] != mst -> pconn[2] = mst; printf("EV CONN 2 %d\n", mst) }
#endif
#endif

#ifdef CFG_SPLIT
  /* split brain: the master is cut off from its replica and from Sentinel
   * (not from every node); the replica is promoted at once */
  :: atomic { faults < MAXF && !split && lnk -> faults++;
       ws = REP; lnk = 0; acc[ws] = 1; nid++; ident[ws] = nid; mst = ws; RIDPROMOTE(ws);
       split = 1; cutT = now; listed[ws] = 0;
       printf("EV PROMOTE %d\n", ws); PREFIX(ws, repof) }
  /* the old master drops its replica from its list after repl-timeout */
  :: atomic { split && listed[1 - mst] -> listed[1 - mst] = 0 }
#ifdef MINREP
  /* min-replicas-to-write 1: the old master refuses writes once its replica
   * has not acknowledged for min-replicas-max-lag (+ 1 s of ping granularity) */
  :: atomic { split && acc[1 - mst] && RT(1 - mst) > cutT + LAG -> acc[1 - mst] = 0 }
#endif
  /* the partition heals: Sentinel turns the old master into a replica */
  :: atomic { split -> split = 0; ws = 1 - mst; acc[ws] = 0;
       repof = mst; lnk = 1; listed[mst] = 1; copydata(ws, mst); RIDFOLLOW(ws, mst);
       printf("EV SYNC %d %d\n", mst, ws); COUNT(mst) }
#ifdef SPLIT_RESTART
  /* the old master restarts while cut off (keeping its data, or empty),
   * still a master for the nodes that reach it */
  :: atomic { faults < MAXF && split && acc[1 - mst] -> faults++; ws = 1 - mst;
       if
       :: printf("EV RESTART %d\n", ws); havoc(ws)
       fi;
       nid++; ident[ws] = nid; RIDRESTART(ws); listed[ws] = 0 }
#endif
  /* a node reaches the other master */
  :: atomic { split && acc[1 - pconn[0]] -> pconn[0] = 1 - pconn[0] }
  :: atomic { split && acc[1 - pconn[1]] -> pconn[1] = 1 - pconn[1] }
#if P > 2
  :: atomic { split && acc[1 - pconn[2]] -> pconn[2] = 1 - pconn[2] }
#endif
  /* after the split, nodes reach the master */
  :: atomic { !split && pconn[0] != mst -> pconn[0] = mst }
  :: atomic { !split && pconn[1] != mst -> pconn[1] = mst }
#if P > 2
  :: atomic { !split && pconn[2] != mst -> pconn[2] = mst }
#endif
#endif

#ifdef CFG_REPL
#if NS != 3
#error "CFG_REPL models three servers"
#endif
  /* ---- three servers: replicas attach, detach, resync, follow a
   * promoted replica or not; promotions one after another ---- */
#ifndef SENTINEL_ONLY
  /* a replica streaming from its master catches up (it holds a prefix of
   * the master's writes, as of some moment) */
  :: atomic { ANY3(LINKED) -> PICK3(LINKED);
       copydata(xo, rof[xo]); printf("EV SYNC %d %d\n", rof[xo], xo); xo = 0 }
  /* its link breaks (a reboot, a network blip, a partition); its master
   * stops listing it (LISTED) */
  :: atomic { JOINED && ANY3(LINKED) -> PICK3(LINKED);
       rlnk[xo] = 0; printf("EV DETACH %d\n", xo); xo = 0 }
#endif
  /* a server attaches to a master (a resync after a blip, a replica
   * Sentinel re-points to a promoted one, an old master turned replica,
   * one that stays with the master it had): a full copy of the master's
   * data and its replid */
  :: atomic { ANYATTACH -> PICKATTACH;
       if
       :: role[xo] == 1 ->
          /* a master turned replica: its replicas lose their stream */
          acc[xo] = 0;
          for (xi : 0 .. NS-1) { if :: rof[xi] == xo -> rlnk[xi] = 0 :: else -> skip fi }; xi = 0
       :: else -> skip
       fi;
       role[xo] = 2; rof[xo] = ws; rlnk[xo] = 1; RIDFOLLOW(xo, ws);
       REPLDATA(xo, ws);
       printf("EV ATTACH %d %d\n", xo, ws); COUNT(ws);
#ifdef REPL_LATE
       if :: xo == NS-1 -> joined = 1 :: else -> skip fi;
#endif
       xo = 0 }
  /* a replica is promoted (REPLICAOF NO ONE: by Sentinel or by hand),
   * whether its master is down, cut off or still reached by some nodes,
   * with the data it holds: a new replid, the one it had (its master's)
   * as master_replid2 */
#ifdef SENTINEL
  /* Sentinel's failover: a Sentinel that knows the master and has been
   * out of contact with it for DA ticks (subjectively down) leads and
   * promotes a replica. The others' votes are not required: Sentinel
   * counts them for seconds after they were given, so they may be back in
   * contact (only the leader's own view is live). Until the failover ends
   * (it learns the new master, SLEARN) the leader names the old master,
   * flagged down and in failover; the others learn the new one later */
  :: atomic { JOINED && faults < MAXF && proms < MAXP && ANY3(LEADOK) && ANY3(PROMOTABLE) ->
       PICK3(PROMOTABLE); PICKQ(LEADOK);
       sfip[xq] = 1; PROMOTE(xo); mst = xo; printf("EV FAILOVER %d %d\n", xq, xo); SSORT; xo = 0; xq = 0 }
#ifdef FORCED
  /* SENTINEL FAILOVER: a Sentinel starts a failover at once, with no
   * down-after wait, flagged in progress from its start ... */
  :: atomic { ANY3(FIPOK) -> PICKQ(FIPOK); sfip[xq] = 1; printf("EV FORCE %d\n", xq); SSORT; xq = 0 }
  /* ... and promotes a replica, at any moment after (within a tick in
   * Redis: the steps between are Sentinel's 100 ms timer); it names the
   * old master, in failover, until the failover ends (SLEARN) */
  :: atomic { JOINED && faults < MAXF && proms < MAXP && ANY3(FIPON) && ANY3(PROMOTABLE) ->
       PICK3(PROMOTABLE); PICKQ(FIPON);
       PROMOTE(xo); mst = xo; printf("EV FAILOVER %d %d\n", xq, xo); SSORT; xo = 0; xq = 0 }
#ifdef HAND
  /* REPLICAOF NO ONE by hand: no Sentinel knows (they turn it back into a
   * replica, an attach) */
  :: atomic { JOINED && faults < MAXF && proms < MAXP && ANY3(PROMOTABLE) ->
       PICK3(PROMOTABLE); PROMOTE(xo); xo = 0 }
#endif
#endif
#if !defined(FORCED_ONLY) && !defined(SENT_STATIC)
  /* a Sentinel loses contact with the master it knows, or regains it */
  :: atomic { ANY3(INCONTACT) -> PICKQ(INCONTACT); slost[xq] = 1; printf("EV SCUT %d\n", xq); SSORT; xq = 0 }
#ifndef SENT_NOHEAL
  :: atomic { ANY3(OUTCONTACT) -> PICKQ(OUTCONTACT); slost[xq] = 0; printf("EV SHEAL %d\n", xq); SSORT; xq = 0 }
#endif
#endif
  /* a Sentinel learns the newest master (the leader: its failover ends,
   * +switch-master; the others: from its hello messages) */
  :: atomic { ANY3(STALEVIEW) -> PICKQ(STALEVIEW); sview[xq] = mst; slost[xq] = 0; sfip[xq] = 0;
       printf("EV SLEARN %d %d\n", xq, mst); SSORT; xq = 0 }
#else
  :: atomic { JOINED && faults < MAXF && proms < MAXP && ANY3(PROMOTABLE) -> PICK3(PROMOTABLE);
       PROMOTE(xo); mst = xo; xo = 0 }
#endif
#ifdef REPL_RESTART
  /* a master restarts with its data (a new run_id and replid, no
   * master_replid2); its replicas lose their stream */
  :: atomic { JOINED && faults < MAXF && ANY3(ISMASTER) -> PICK3(ISMASTER); faults++;
       RIDRESTART(xo); nid++; ident[xo] = nid; DEADSETS;
       for (xi : 0 .. NS-1) { if :: rof[xi] == xo -> rlnk[xi] = 0 :: else -> skip fi }; xi = 0;
       printf("EV RESTART %d\n", xo); xo = 0 }
#endif
  /* a node reaches another master (each at its own moment) */
  :: atomic { MOVES(0) -> PICKMOVE(0); pconn[0] = xo; CLRCHK(0); printf("EV CONN 0 %d\n", xo); xo = 0 }
  :: atomic { MOVES(1) -> PICKMOVE(1); pconn[1] = xo; CLRCHK(1); printf("EV CONN 1 %d\n", xo); xo = 0 }
#if P > 2
  :: atomic { MOVES(2) -> PICKMOVE(2); pconn[2] = xo; CLRCHK(2); printf("EV CONN 2 %d\n", xo); xo = 0 }
#endif
#endif
  od
}
