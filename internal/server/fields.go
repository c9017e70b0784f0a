package server

// appendField appends the line "name: value": name is one of the
// package's canonical constants and value the gateway's own text (an id
// it made, a figure it formatted, a constant), which needs no check.
func appendField(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ':', ' ')
	b = append(b, value...)
	return append(b, '\r', '\n')
}

// appendValue appends v with every byte a header value may not carry
// (control bytes but HTAB, DEL) turned into a space, as the engine does
// to the map's values: a line handed over is not checked again. Names
// of deployments are mostly letters, digits, dashes and dots, which
// printable tests eight at a time.
func appendValue(b []byte, v string) []byte {
	if printable(v) {
		return append(b, v...)
	}
	return appendSanitised(b, v)
}

// printable reports whether every byte of v is printable ASCII, testing
// eight bytes at a time (a byte of 0x80 or above, or HTAB, fails it and
// goes to appendSanitised, which keeps what a value may carry).
func printable(v string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; len(v) >= 8; v = v[8:] {
		w := uint64(v[0]) | uint64(v[1])<<8 | uint64(v[2])<<16 | uint64(v[3])<<24 |
			uint64(v[4])<<32 | uint64(v[5])<<40 | uint64(v[6])<<48 | uint64(v[7])<<56
		// A byte below 0x20 borrows into its top bit in w-0x20…; one of
		// 0x7f or above has its top bit set in w+1… or in w.
		if (w-ones*' ')&^w&highs != 0 || ((w+ones)|w)&highs != 0 {
			return false
		}
	}
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] >= 0x7f {
			return false
		}
	}
	return true
}

func appendSanitised(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// streamFields sets a stream's own fields before its relay starts and
// returns what the relay is to send with its first event
// (stream.Options.Fields). For an h1.FieldWriter they are lines, formatted
// now (so the overhead is the time until now, as in the map) into the
// writer's buffer but not handed over: the relay does that with the
// first event, so an attempt that fails before it leaves nothing behind
// for the next attempt's fields or the error's (which go into the map)
// to be sent next to. Elsewhere they go into the map, as headers puts
// them. The cost trailer is declared in the map either way: the engine
// frames the body from the map, and settle puts the trailer there.
func (x *exchange) streamFields() []byte {
	x.declareCostTrailer()
	if x.fw == nil || x.mapHeaders {
		x.headers()
		return nil
	}
	return x.appendHeaders(x.fw.FieldBuffer())
}
