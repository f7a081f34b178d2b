package sim

import "testing"

// TestMutations_TextsExist: every script mutation's edits find their
// text in the scripts as they are now (scripts/lua/*.lua), so no tooth
// silently stops biting after a script changes; and each changes the
// script it targets.
func TestMutations_TextsExist(t *testing.T) {
	for _, m := range Mutations {
		if m.Switch != "" {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatal(p)
				}
			}()
			if len(m.mutants()) == 0 {
				t.Fatal("no script changed")
			}
		})
	}
}
