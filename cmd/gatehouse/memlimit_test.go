package main

import "testing"

func TestMemoryLimit(t *testing.T) {
	tests := []struct {
		name  string
		env   string
		files []string
		want  int64
		ok    bool
	}{
		{"cgroup v2 limit", "", []string{"1073741824\n", ""}, 966367641, true},
		{"cgroup v2 unlimited", "", []string{"max\n", ""}, 0, false},
		{"cgroup v1 limit", "", []string{"", "536870912\n"}, 483183820, true},
		{"cgroup v1 unlimited", "", []string{"", "9223372036854771712\n"}, 0, false},
		{"GOMEMLIMIT set wins", "900MiB", []string{"1073741824", ""}, 0, false},
		{"no cgroup files", "", []string{"", ""}, 0, false},
		{"garbage", "", []string{"lots", ""}, 0, false},
		{"too small to share", "", []string{"33554432", ""}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := memoryLimit(tc.env, tc.files)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("memoryLimit = %d, %t; want %d, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}
