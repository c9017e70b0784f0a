package server

import "net/http"

// fieldWriter is h1.FieldWriter, gatehouse's HTTP/1 engine's way to take
// header lines a handler formatted itself, found by its methods (this
// package does not import the engine). The exchange sets a dozen fields
// on every answer; as lines formatted into one buffer they cost neither
// map entries nor the engine's per-field checks.
type fieldWriter interface {
	FieldBuffer() []byte
	AppendFields(lines []byte)
}

// fieldWriterOf finds w's fieldWriter, through the wrappers that unwrap
// as http.ResponseController's do; nil when there is none (net/http's
// server, a recorder), and the fields then go into the map.
func fieldWriterOf(w http.ResponseWriter) fieldWriter {
	for {
		switch v := w.(type) {
		case fieldWriter:
			return v
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return nil
		}
	}
}

// appendField appends the line "name: value": name is one of the
// package's canonical constants, and value is run through appendValue.
func appendField(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ':', ' ')
	return append(appendValue(b, value), '\r', '\n')
}

// appendValue appends v with every byte a header value may not carry
// (control bytes but HTAB, DEL) turned into a space, as the engine does
// to the map's values: a line handed over is not checked again.
func appendValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return appendSanitised(b, v)
		}
	}
	return append(b, v...)
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
