package structs

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrEmptyEntry is returned when a log entry has no type byte.
var ErrEmptyEntry = errors.New("empty log entry")

// Encode turns a message into a log entry: one type byte, then the JSON body.
func Encode(t MessageType, msg any) ([]byte, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	buf := make([]byte, 0, len(body)+1)
	buf = append(buf, byte(t))
	return append(buf, body...), nil
}

// EntryType returns the message type of a log entry.
func EntryType(buf []byte) (MessageType, error) {
	if len(buf) == 0 {
		return 0, ErrEmptyEntry
	}
	return MessageType(buf[0]), nil
}

// Decode reads the body of a log entry (everything after the type byte) into out.
func Decode(buf []byte, out any) error {
	if len(buf) == 0 {
		return ErrEmptyEntry
	}
	if err := json.Unmarshal(buf[1:], out); err != nil {
		return fmt.Errorf("decode %s: %w", MessageType(buf[0]), err)
	}
	return nil
}
