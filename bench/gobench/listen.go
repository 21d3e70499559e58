package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// listenLoopback keeps the cluster off every interface but loopback.
func listenLoopback(network, address string) (net.Listener, error) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	return net.Listen(network, net.JoinHostPort("127.0.0.1", port))
}

// metadataV1 sends Metadata v1 for all topics (no ApiVersions first) and reads the answer.
func metadataV1(address string) error {
	conn, err := net.Dial("tcp", address)
	if err != nil {
		return err
	}
	defer conn.Close()
	clientID := "bench"
	body := []byte{0, 3, 0, 1, 0, 0, 0, 1} // api key 3, version 1, correlation id 1
	body = binary.BigEndian.AppendUint16(body, uint16(len(clientID)))
	body = append(body, clientID...)
	body = binary.BigEndian.AppendUint32(body, 0xffffffff) // topics: null = all
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := conn.Write(append(frame, body...)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	answer := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, answer); err != nil {
		return err
	}
	if len(answer) < 8 || binary.BigEndian.Uint32(answer[4:8]) == 0 {
		return fmt.Errorf("metadata answer lists no brokers")
	}
	return nil
}
