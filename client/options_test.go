package client_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
)

func TestNew_InvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts client.Options
		want string
	}{
		{"no address", client.Options{}, "no daemon address"},
		{"empty address", client.Options{Addrs: []string{""}}, "empty daemon address"},
		{"port out of range", client.Options{Addrs: []string{"127.0.0.1:99999"}}, `port "99999", want a number in 1..65535`},
		{"port zero", client.Options{Addrs: []string{"127.0.0.1:0"}}, `port "0"`},
		{"port not a number", client.Options{Addrs: []string{"127.0.0.1:http"}}, `port "http"`},
		{"no host", client.Options{Addrs: []string{":7379"}}, "has no host"},
		{"broken IPv6", client.Options{Addrs: []string{"[::1"}}, `want "host:port"`},
		{"URL as address", client.Options{Addrs: []string{"flaked://h:1"}}, `want "host:port"`},
		{"list as address", client.Options{Addrs: []string{"a:1,b:2"}}, `daemon address "a:1,b:2": want "host:port"`},
		{"list without ports", client.Options{Addrs: []string{"a,b"}}, `host "a,b" is not a host name`},
		{"repeated", client.Options{Addrs: []string{"h:7379", "h"}}, `"h" given twice`},
		{"too many", client.Options{Addrs: make([]string, client.MaxAddrs+1)}, "65 daemon addresses, valid range is 1..64"},
		{"user without password", client.Options{Addrs: []string{"h:1"}, Username: "u"}, `username "u" without a password`},
		{"negative timeout", client.Options{Addrs: []string{"h:1"}, ReadTimeout: -1}, "ReadTimeout -1ns, valid range is 1ms..1h0m0s"},
		{"tiny dial timeout", client.Options{Addrs: []string{"h:1"}, DialTimeout: time.Microsecond}, "DialTimeout 1µs"},
		{"pool size", client.Options{Addrs: []string{"h:1"}, PoolSize: -1}, "PoolSize -1"},
		{"max batch", client.Options{Addrs: []string{"h:1"}, MaxBatch: client.MaxMaxBatch + 1}, "MaxBatch 1000001, valid range is 1..1000000"},
		{"prefetch above max batch", client.Options{Addrs: []string{"h:1"}, MaxBatch: 10, Prefetch: 11}, "Prefetch 11, valid range is 0..MaxBatch (10)"},
		{"negative prefetch", client.Options{Addrs: []string{"h:1"}, Prefetch: -1}, "Prefetch -1"},
		{"max age without prefetch", client.Options{Addrs: []string{"h:1"}, MaxAge: time.Second}, "MaxAge 1s without Prefetch"},
		{"max age too long", client.Options{Addrs: []string{"h:1"}, Prefetch: 1, MaxAge: 2 * time.Hour}, "MaxAge 2h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(tc.opts)
			if err == nil {
				c.Close()
				t.Fatalf("New(%+v) worked", tc.opts)
			}
			if !errors.Is(err, client.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %q, want ErrInvalidOptions saying %q", err, tc.want)
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want client.Options
		tls  bool
	}{
		{"flaked://127.0.0.1:7379", client.Options{Addrs: []string{"127.0.0.1:7379"}}, false},
		{"flaked://h1:1,h2:2/", client.Options{Addrs: []string{"h1:1", "h2:2"}}, false},
		{"FLAKED://h", client.Options{Addrs: []string{"h"}}, false},
		{"flaked://[::1]:7000,h", client.Options{Addrs: []string{"[::1]:7000", "h"}}, false},
		{"flaked://:p%40ss@h:1", client.Options{Addrs: []string{"h:1"}, Password: "p@ss"}, false},
		{"flaked://u:p@ss@h:1", client.Options{Addrs: []string{"h:1"}, Username: "u", Password: "p@ss"}, false},
		{"flakeds://u:pw@h:1?skip_verify=true", client.Options{Addrs: []string{"h:1"}, Username: "u", Password: "pw"}, true},
		{
			"flaked://h:1?prefetch=1000&max_age=1s&dial_timeout=50ms&read_timeout=3s&write_timeout=4s&pool_size=8&max_batch=5000&down_for=2s",
			client.Options{Addrs: []string{"h:1"}, Prefetch: 1000, MaxAge: time.Second, DialTimeout: 50 * time.Millisecond,
				ReadTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second, PoolSize: 8, MaxBatch: 5000, DownFor: 2 * time.Second},
			false,
		},
	} {
		got, err := client.ParseURL(tc.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if (got.TLS != nil) != tc.tls {
			t.Errorf("ParseURL(%q): TLS %v, want %v", tc.url, got.TLS != nil, tc.tls)
		}
		if tc.tls && !got.TLS.InsecureSkipVerify {
			t.Errorf("ParseURL(%q): skip_verify not set", tc.url)
		}
		got.TLS = nil
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) =\n %+v, want\n %+v", tc.url, got, tc.want)
		}
	}
}

func TestParseURL_Invalid(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "want flaked://host:port"},
		{"127.0.0.1:7379", "want flaked://host:port"},
		{"redis://h:1", `scheme "redis", want flaked:// or flakeds://`},
		{"flaked://", "no host"},
		{"flaked://:secret@", "no host"},
		{"flaked://h:1,,h:2", "empty host"},
		{"flaked://h:1/0", `unexpected "/0" after the hosts`},
		{"flaked://h:1#x", `unexpected "#x"`},
		{"flaked://h:99999", `port "99999"`},
		{"flaked://h:1,h:1", "given twice"},
		{"flaked://user@h:1", `user "user" without a password`},
		{"flaked://:%zz@h:1", "password: bad % escape"},
		{"flaked://h:1?prefetch=lots", `prefetch="lots": want an integer`},
		{"flaked://h:1?max_age=5", `max_age="5": want a duration such as 500ms or 2s`},
		{"flaked://h:1?max_age=1s", "MaxAge 1s without Prefetch"},
		{"flaked://h:1?prefetch=10&prefetch=20", `parameter "prefetch" given 2 times`},
		{"flaked://h:1?db=0", `unknown parameter "db": known are dial_timeout, down_for, max_age, `},
		{"flaked://h:1?skip_verify=true", "only with TLS (flakeds://)"},
		{"flakeds://h:1?skip_verify=maybe", "want true or false"},
		{"flaked://h:1?prefetch=-5", "Prefetch -5"},
	} {
		_, err := client.ParseURL(tc.url)
		if err == nil {
			t.Errorf("ParseURL(%q) worked", tc.url)
			continue
		}
		if !errors.Is(err, client.ErrInvalidURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q) = %q, want ErrInvalidURL saying %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q) = %q shows the password", tc.url, err)
		}
	}
	// NewFromURL reports the same.
	if _, err := client.NewFromURL("flaked://h:1?pool=3"); !errors.Is(err, client.ErrInvalidURL) {
		t.Errorf("NewFromURL with an unknown parameter = %v", err)
	}
}
