package proc

import "testing"

func TestListenAddr(t *testing.T) {
	log := "some noise\nmockllm listening on 127.0.0.1:40123\nmore\n"
	if got, ok := listenAddr([]byte(log)); !ok || got != "127.0.0.1:40123" {
		t.Errorf("listenAddr() = %q, %t", got, ok)
	}
	if _, ok := listenAddr([]byte("mockllm listening on")); ok {
		t.Error("listenAddr() found an address in a line without one")
	}
}
