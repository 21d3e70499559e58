module minibroker.test/sarama

go 1.22

require github.com/IBM/sarama v1.61.1
