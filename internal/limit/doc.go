// Package limit owns admission control: the rate limits (requests and
// tokens per minute) and the USD budgets a request must pass, checked and
// reserved together before the upstream call, and settled with the real
// usage after it.
//
// It imports only the standard library. Backends that need a database or
// Redis live under internal/store and implement the ports declared here
// (Admitter, SpendStore); limit never imports them.
//
// # Design
//
// Reserve, then settle. Admit checks every limit of a request and, if all
// pass, reserves the request's worst case in all of them at once: one
// request and the estimated tokens (prompt + max output) in each rate
// bucket, the worst-case cost in each budget. If any limit refuses,
// nothing is reserved. Settle later replaces the reservation with what the
// upstream reported (zero for a call that failed without usage), exactly
// once: a Reservation carries a shared flag, so a second Settle of it or
// of any copy is a no-op. Checking first and recording later is how other
// gateways overspend budgets under concurrency; reserving the worst case
// makes "never above the budget" hold at any moment, at the price of
// refusing a request that might have fitted had the others already
// settled low.
//
// One Redis script. In cluster mode a request's limits are checked and
// reserved by one Lua script called with EVALSHA: one round trip, and
// atomic, because Redis runs a script to completion before any other
// command. Separate commands per limit would cost a round trip each and
// let two replicas interleave between check and reserve. The script is
// loaded once and re-sent with EVAL when Redis answers NOSCRIPT.
//
// Leases. Optionally (Leaser, lease.go), each replica takes batches of
// every counter from the backend and admits against them in-process, so
// at steady state no admission waits on Redis; the cost is a bounded
// overshoot of rate limits across replicas, stated in lease.go.
//
// Hash tags. Redis Cluster runs a script only when all its keys hash to
// one slot, so every key of one request carries the same hash tag: the
// request's Admission.Tag, which the caller sets to the project ID. Keys,
// customers and key-and-model pairs all belong to one project, so a
// request's key, project, customer and key-model counters always share
// the tag. The limits of this scheme: one project's counters live on one
// shard (a single very hot project cannot be spread over several), and no
// limit can span projects (a global or per-organisation budget would need
// a second script call, or a tag shared by everything it spans).
//
// Integer micro-dollars. Money is counted in Micros (1e-6 USD) in int64:
// exact addition in Go, in SQL and in Redis's INCRBY, where summing
// float64 dollars would drift and make "exactly at the budget" depend on
// the order of additions. int64 micro-dollars reach 9.2e12 USD.
//
// Crash-loss bound (embedded mode). Counters live in memory; settled
// spend is written to the SpendStore (SQLite) by a background flusher
// every FlushEvery (default 250 ms). A crash loses at most the spend
// settled since the last successful flush began: FlushEvery plus the
// duration of one write (a few milliseconds on a local disk), so under
// one second with the defaults. Requests in flight at the crash never
// settle, so their cost is also not recorded. While the store refuses
// writes the unflushed deltas are kept and retried, so the window grows
// only for as long as the store stays down.
package limit
