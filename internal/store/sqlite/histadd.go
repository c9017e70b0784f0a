package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"

	"gatehouse/internal/account"
	"modernc.org/sqlite"
)

// histAddFunc is the SQL name of histAdd on the writer's connections.
const histAddFunc = "gatehouse_hist_add"

// newWriterDriver makes the driver that opens a store's writer
// connections. It is a driver of its own, not the "sqlite" one sql.Open
// finds, so that histAdd is registered on the writer alone and on
// nothing else in the process; one per store, so no package state.
func newWriterDriver() *sqlite.Driver {
	d := &sqlite.Driver{}
	d.MustRegisterDeterministicScalarFunction(histAddFunc, 2, histAdd)
	return d
}

// histAdd(stored, added) returns the latency histogram stored plus
// added, both JSON objects of bucket counts as account.Histogram writes
// them. The rollup's upsert merges each batch's histogram into its row
// with it. SQLite's own JSON functions did the same merge (json_each of
// the added object, a path lookup into the stored one per bucket,
// json_group_object and json_patch), each parsing and re-encoding both
// objects several times: with small batches that was a quarter of what
// a record cost (BENCHMARKS.md). The buckets come out ascending.
func histAdd(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	var h account.Histogram
	for _, a := range args {
		var err error
		switch v := a.(type) {
		case string:
			err = h.AddJSON(v)
		case []byte:
			err = h.AddJSON(string(v))
		case nil:
		default:
			err = fmt.Errorf("a latency histogram of type %T", a)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", histAddFunc, err)
		}
	}
	return string(h.AppendJSON(nil)), nil
}

// writerConnector opens connections of a newWriterDriver for
// database/sql.
type writerConnector struct {
	dsn string
	d   *sqlite.Driver
}

func (c writerConnector) Connect(context.Context) (driver.Conn, error) {
	return c.d.Open(c.dsn)
}
func (c writerConnector) Driver() driver.Driver { return c.d }
