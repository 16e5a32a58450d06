package store_test

import (
	"testing"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/store"
)

func testAudit(t *testing.T, st *store.Store) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i, e := range []audit.Event{
		{At: t0, Org: "org_a", Actor: "usr_1", Sandbox: "sbx_1", Action: audit.SandboxCreate},
		{At: t0.Add(time.Minute), Org: "org_a", Actor: "usr_1", Sandbox: "sbx_1", Action: audit.ShellOpen, Detail: "12s, 3400 bytes"},
		{At: t0.Add(2 * time.Minute), Org: "org_b", Actor: "usr_2", Action: audit.KeyCreate, Target: "key_x"},
		{At: t0.Add(3 * time.Minute), Org: "org_a", Sandbox: "sbx_2", Action: audit.GitPush, Outcome: audit.Refused, Target: "acme/app", Detail: "refs/heads/main"},
	} {
		if err := st.Record(t.Context(), e); err != nil {
			t.Fatalf("Record %d: %v", i, err)
		}
	}
	all, err := st.ListAudit(t.Context(), audit.Filter{})
	if err != nil || len(all) != 4 || all[0].Action != audit.SandboxCreate || all[3].Outcome != audit.Refused || !all[1].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("ListAudit = %+v, %v", all, err)
	}
	if all[0].Outcome != audit.OK {
		t.Errorf("default outcome %q, want ok", all[0].Outcome)
	}
	for _, tc := range []struct {
		f    audit.Filter
		want int
	}{
		{audit.Filter{Org: "org_a"}, 3}, {audit.Filter{Sandbox: "sbx_1"}, 2}, {audit.Filter{Since: t0.Add(90 * time.Second)}, 2},
		{audit.Filter{Org: "org_a", Limit: 1}, 1},
	} {
		got, err := st.ListAudit(t.Context(), tc.f)
		if err != nil || len(got) != tc.want {
			t.Errorf("ListAudit(%+v) = %d events, %v; want %d", tc.f, len(got), err, tc.want)
		}
	}
	newest, _ := st.ListAudit(t.Context(), audit.Filter{Org: "org_a", Limit: 1})
	if len(newest) == 1 && newest[0].Action != audit.GitPush {
		t.Errorf("Limit keeps %s, want the newest (git.push)", newest[0].Action)
	}
}
