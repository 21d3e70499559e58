module minibroker.test/share

go 1.22

require github.com/twmb/franz-go v1.22.2
