package stream

import (
	"testing"
	"unsafe"
)

// relayerSizeClass is the allocator's size class a Relayer is to fit:
// every stream allocates one and holds it for as long as it runs. The
// next class up is 320 bytes.
const relayerSizeClass = 288

// TestRelayerSizeClass: the Relayer stays in its size class (a flag
// added between wider fields takes eight bytes; see Result).
func TestRelayerSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Relayer{}); n > relayerSizeClass {
		t.Errorf("a Relayer is %d bytes, over the %d-byte size class", n, relayerSizeClass)
	}
}
