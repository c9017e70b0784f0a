//go:build !stackprobe

package main

// startStackProbe does nothing in a normal build; stackprobe.go has the
// probe the stack-margin tests build in.
func startStackProbe() {}
