package h1

import (
	"io"
	"log"
)

// quietLog drops what the servers log about the malformed requests the
// tests send on purpose.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }
