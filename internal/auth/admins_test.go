package auth

import "testing"

func TestAdminsMatch(t *testing.T) {
	as := Admins{
		{Name: "root", Role: RoleAdmin, Hash: HashKey("root-key")},
		{Name: "dash", Role: RoleViewer, Hash: HashKey("dash-key")},
		{Name: "unset", Role: RoleAdmin}, // the zero hash must match nothing
	}
	tests := []struct {
		secret string
		want   string
		ok     bool
	}{
		{"root-key", "root", true},
		{"dash-key", "dash", true},
		{"root-ke", "", false},
		{"root-key ", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := as.MatchSecret(tt.secret)
		if ok != tt.ok || got.Name != tt.want {
			t.Errorf("MatchSecret(%q) = %q, %t; want %q, %t", tt.secret, got.Name, ok, tt.want, tt.ok)
		}
	}
	if _, ok := as.Match(Hash{}); ok {
		t.Error("the zero hash matched a credential with no key")
	}
	if _, ok := Admins(nil).MatchSecret("root-key"); ok {
		t.Error("no credentials matched a key")
	}
}

func TestRoleAndActor(t *testing.T) {
	if !RoleAdmin.CanWrite() || RoleViewer.CanWrite() || Role("").CanWrite() {
		t.Error("only the admin role may write")
	}
	if s := (Actor{Name: "ops"}).String(); s != "ops" {
		t.Errorf("key actor = %q", s)
	}
	if s := (Actor{Name: "ops", Session: true}).String(); s != "session:ops" {
		t.Errorf("session actor = %q", s)
	}
}
