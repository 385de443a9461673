package store

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/drover-run/drover/migrations"
)

func file(sql string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(sql)} }

func TestLoadMigrationsSortsAndNames(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"0002_add_index.sql":  file("CREATE INDEX i ON a (x);"),
		"0001_create_a.sql":   file("CREATE TABLE a (x int);"),
		"README.md":           file("not a migration"),
		"0010_old.sql.orig":   file("ignored: not .sql"),
		"0003_more_stuff.sql": file("SELECT 1;"),
	}
	got, err := loadMigrations(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		version int
		name    string
	}{{1, "create_a"}, {2, "add_index"}, {3, "more_stuff"}}
	if len(got) != len(want) {
		t.Fatalf("got %d migrations, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].version != w.version || got[i].name != w.name {
			t.Errorf("migration %d = (%d, %q), want (%d, %q)", i, got[i].version, got[i].name, w.version, w.name)
		}
	}
	if got[0].sql != "CREATE TABLE a (x int);" {
		t.Errorf("migration 1 sql = %q", got[0].sql)
	}
}

func TestLoadMigrationsRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fsys    fstest.MapFS
		wantErr string
	}{
		{"gap", fstest.MapFS{"0001_a.sql": file("SELECT 1"), "0003_c.sql": file("SELECT 1")},
			`gap: "0003_c.sql" has version 3, expected 2`},
		{"not from 1", fstest.MapFS{"0002_b.sql": file("SELECT 1")},
			`gap: "0002_b.sql" has version 2, expected 1`},
		{"duplicate", fstest.MapFS{"0001_a.sql": file("SELECT 1"), "001_b.sql": file("SELECT 1"), "0002_c.sql": file("SELECT 1")},
			"duplicate migration version 1"},
		{"no version", fstest.MapFS{"0001_a.sql": file("SELECT 1"), "initial.sql": file("SELECT 1")},
			`"initial.sql": name is not <version>_<name>.sql`},
		{"dash", fstest.MapFS{"0001-a.sql": file("SELECT 1")},
			`"0001-a.sql": name is not <version>_<name>.sql`},
		{"no name", fstest.MapFS{"0001_.sql": file("SELECT 1")},
			`"0001_.sql": name is not <version>_<name>.sql`},
		{"version zero", fstest.MapFS{"0000_a.sql": file("SELECT 1")},
			`"0000_a.sql": version must be a number from 1`},
		{"empty file", fstest.MapFS{"0001_a.sql": file(" \n\t\n")}, `"0001_a.sql" is empty`},
		{"nothing", fstest.MapFS{"README.md": file("x")}, "no migration files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadMigrations(tc.fsys)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestPendingMigrationsRefusesOutOfOrder(t *testing.T) {
	t.Parallel()
	all := []migration{{version: 1, file: "0001_a.sql"}, {version: 2, file: "0002_b.sql"}, {version: 3, file: "0003_c.sql"}}

	pending, err := pendingMigrations(all, []int{1})
	if err != nil || len(pending) != 2 || pending[0].version != 2 || pending[1].version != 3 {
		t.Fatalf("pending after 1 = %+v, %v; want 2 and 3", pending, err)
	}
	pending, err = pendingMigrations(all, []int{1, 2, 3, 4})
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending on a newer database = %+v, %v; want none", pending, err)
	}
	_, err = pendingMigrations(all, []int{1, 3})
	if err == nil || !strings.Contains(err.Error(), "migration 2 (0002_b.sql) is pending but version 3 is already applied") {
		t.Fatalf("err = %v, want the out-of-order refusal", err)
	}
}

func TestEmbeddedMigrationsAreValid(t *testing.T) {
	t.Parallel()
	all, err := loadMigrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if all[0].version != 1 || all[0].name != "initial" {
		t.Fatalf("first migration = %d %q, want 1 \"initial\"", all[0].version, all[0].name)
	}
}
