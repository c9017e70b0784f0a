package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"gatehouse/internal/limit"
)

// carryScript adds spend settled elsewhere (a limit.Fallback's local
// limiter, while Redis could not be reached) to one budget counter,
// creating it as an admission would, with the same expiry.
//
//	KEYS  1 a budget counter   ARGV  1 micro-dollars  2 expire-at (ms, 0 = never)
const carryScript = `
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if tonumber(ARGV[2]) > 0 then redis.call('PEXPIREAT', KEYS[1], ARGV[2]) end
return v
`

// AddSpend implements limit.SpendAdder: it adds delta to the counter of
// k, one script call. It does not write the durable record, which the
// spend was recorded in where it was settled. Errors reaching Redis wrap
// limit.ErrUnavailable.
func (l *Limiter) AddSpend(ctx context.Context, k limit.BudgetKey, delta int64) error {
	tag := tagOf(&limit.Admission{Tag: k.Tag})
	b := limit.Budget{Scope: k.Scope, ID: k.ID, Period: k.Period}
	exp := int64(0)
	if k.Period != limit.Total && k.Start != "" {
		start, err := time.Parse(time.DateOnly, k.Start)
		if err != nil {
			return fmt.Errorf("redis: add spend: period start %q: %w", k.Start, err)
		}
		_, end := k.Period.Span(start)
		exp = end.Add(budgetGrace).UnixMilli()
	}
	// Made per call (a SHA-1 of a short text): carries are rare, one per
	// counter after an outage, and the Limiter's own scripts are its
	// file's business.
	s := newScript(carryScript)
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	err := l.run(cctx, &s, []string{l.budgetKey(tag, &b, k.Start)},
		[]string{strconv.FormatInt(delta, 10), strconv.FormatInt(exp, 10)}).Error()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("redis: add spend: %w", ctx.Err())
		}
		return fmt.Errorf("redis: add spend: %w: %w", limit.ErrUnavailable, err)
	}
	return nil
}

var _ limit.SpendAdder = (*Limiter)(nil)
