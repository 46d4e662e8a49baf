package failpoint

import "testing"

func TestAnArmedFailpointCrashesAtItsNthHit(t *testing.T) {
	var crashed []string
	crash = func() { crashed = append(crashed, "crash") }
	t.Cleanup(func() { Arm("") })
	Arm("a@2, b")
	Reach("c")
	Reach("a")
	if len(crashed) != 0 {
		t.Fatalf("crashed before the second hit of a: %v", crashed)
	}
	Reach("a")
	if len(crashed) != 1 {
		t.Fatalf("the second hit of a did not crash")
	}
	Reach("b")
	if len(crashed) != 2 {
		t.Fatalf("the first hit of b did not crash")
	}
	Arm("")
	Reach("b")
	if len(crashed) != 2 {
		t.Fatalf("a disarmed failpoint crashed")
	}
}
