package limit

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// A typical request: key and project rates, key-model rate, key and
// project budgets.
func benchAdmission(key string) Admission {
	return Admission{
		Tag: "p",
		Rates: []Rate{
			{Scope: ScopeKey, ID: key, RPM: 1 << 40, TPM: 1 << 40},
			{Scope: ScopeProject, ID: "p", RPM: 1 << 40, TPM: 1 << 40},
			{Scope: ScopeKeyModel, ID: KeyModelID(key, "gpt-4o-mini"), RPM: 1 << 40},
		},
		Budgets: []Budget{
			{Scope: ScopeKey, ID: key, Limit: 1 << 60, Period: Month},
			{Scope: ScopeProject, ID: "p", Limit: 1 << 60, Period: Day},
		},
		Tokens: 1200,
		Cost:   USD(0.002),
	}
}

// BenchmarkEmbeddedAdmitSettle: one admission and its settle, one key.
func BenchmarkEmbeddedAdmitSettle(b *testing.B) {
	e := newEmbedded(b, Options{})
	ctx := context.Background()
	a := benchAdmission("k")
	b.ReportAllocs()
	for b.Loop() {
		d, _ := e.Admit(ctx, a)
		e.Settle(ctx, d.Reservation, Actual{Tokens: 800, Cost: USD(0.001)})
	}
}

// BenchmarkEmbeddedAdmitParallel: many keys of one project in parallel
// (they share the project's counters, the realistic contention).
func BenchmarkEmbeddedAdmitParallel(b *testing.B) {
	e := newEmbedded(b, Options{})
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		a := benchAdmission("k" + strconv.FormatInt(n.Add(1), 10))
		for pb.Next() {
			d, _ := e.Admit(ctx, a)
			e.Settle(ctx, d.Reservation, Actual{Tokens: 800, Cost: USD(0.001)})
		}
	})
}

// BenchmarkFallbackOpenDegraded: an admission and its settle while the
// primary is down and the Fallback fails open, between probes: what a
// request costs during an outage (the local limiter, no wait on the
// primary).
func BenchmarkFallbackOpenDegraded(b *testing.B) {
	ctx := context.Background()
	p := &flakyPrimary{down: true}
	f := &Fallback{Primary: p, Local: newEmbedded(b, Options{}), Policy: FailOpen, Replicas: 2, Cooldown: time.Hour}
	b.Cleanup(func() { f.Close(ctx) })
	a := benchAdmission("k")
	if d, err := f.Admit(ctx, a); err != nil || !d.Allowed {
		b.Fatalf("the failure: %+v, %v", d, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		d, _ := f.Admit(ctx, a)
		f.Settle(ctx, d.Reservation, Actual{Tokens: 800, Cost: USD(0.001)})
	}
}

// BenchmarkMicrosAppend: a cost and a budget's remainder, as an answer
// of a budgeted key carries them.
func BenchmarkMicrosAppend(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = Micros(1_234).Append(buf[:0])
		buf = Micros(999_999_998_765_432).Append(buf)
	}
}

// BenchmarkEmbeddedAdmitSettleKey: one admission and its settle for the
// shape of cmd/gatehouse's limits-h1 key (its own rpm and tpm, a total
// budget), the one the path benchmark's instruction counts take: with
// the key's Memo, as the gateway admits, and without.
func BenchmarkEmbeddedAdmitSettleKey(b *testing.B) {
	for _, memo := range []bool{true, false} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) {
			e := newEmbedded(b, Options{})
			ctx := context.Background()
			a := Admission{
				Tag:     "static:bench",
				Rates:   []Rate{{Scope: ScopeKey, ID: "k", RPM: 1 << 40, TPM: 1 << 40}},
				Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: 1 << 60, Period: Total}},
				Tokens:  1200,
				Cost:    USD(0.002),
			}
			if memo {
				a.Memo = &Memo{}
			}
			var d Decision
			b.ReportAllocs()
			for b.Loop() {
				e.AdmitInto(ctx, &a, &d)
				e.Settle(ctx, d.Reservation, Actual{Tokens: 800, Cost: USD(0.001)})
			}
		})
	}
}

// BenchmarkEmbeddedAdmitSettleTemplate: BenchmarkEmbeddedAdmitSettleKey
// as the gateway admits that key: its rates and budget listed from its
// principal's Template, kept in its Memo, and settled spend recorded in
// a SpendLog (flushed by the hour: not in the count).
func BenchmarkEmbeddedAdmitSettleTemplate(b *testing.B) {
	e := newEmbedded(b, Options{Spend: &memSpend{}, FlushEvery: time.Hour})
	ctx := context.Background()
	t := NewTemplate([]Rate{{Scope: ScopeKey, ID: "k", RPM: 1 << 40, TPM: 1 << 40}},
		[]Budget{{Scope: ScopeKey, ID: "k", Limit: 1 << 60, Period: Total}}, nil)
	a := Admission{Tag: "static:bench", Rates: t.Rates(), Budgets: t.Budgets(), Tokens: 1200, Cost: USD(0.002), Memo: &Memo{}}
	a.Memo.KeepTemplate(t)
	var d Decision
	b.ReportAllocs()
	for b.Loop() {
		e.AdmitInto(ctx, &a, &d)
		e.SettleInPlace(ctx, &d.Reservation, Actual{Tokens: 800, Cost: USD(0.001)})
	}
}
