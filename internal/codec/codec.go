package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// The metadata an encrypted payload carries. The encoding tells a reader
// (the Web UI, the CLI) that the codec server must decode it first.
const (
	MetadataEncoding = "encoding"
	MetadataKeyID    = "encryption-key-id"
	EncodingName     = "binary/encrypted"
)

// Codec seals payloads with its first key and opens those of any of its
// keys. It implements the SDK's converter.PayloadCodec and is safe for
// concurrent use.
type Codec struct {
	encryptID string
	aeads     map[string]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns a codec over keys; keys[0] encrypts.
func New(keys []Key) (*Codec, error) {
	if len(keys) == 0 {
		return nil, errors.New("codec: no keys")
	}
	c := &Codec{encryptID: keys[0].ID, aeads: map[string]cipher.AEAD{}}
	for _, k := range keys {
		if err := checkKeyID(k.ID); err != nil {
			return nil, fmt.Errorf("codec: key ID %q: %w", k.ID, err)
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("codec: key ID %q given twice", k.ID)
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("codec: key %q is %d bytes, want %d", k.ID, len(k.Secret), KeySize)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

// EncryptingKeyID is the ID of the key new payloads are sealed with.
func (c *Codec) EncryptingKeyID() string { return c.encryptID }

// Encode seals each payload whole (metadata and data), so not even its
// encoding or type shows. The key ID is bound to the ciphertext as
// additional data: a payload relabelled with another ID does not open.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.encryptID]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: encode payload: %w", err)
		}
		sealed := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return nil, fmt.Errorf("codec: nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				MetadataEncoding: []byte(EncodingName),
				MetadataKeyID:    []byte(c.encryptID),
			},
			Data: aead.Seal(sealed, sealed, plain, []byte(c.encryptID)),
		}
	}
	return out, nil
}

// Decode opens sealed payloads and passes others through unchanged, so a
// history written before encryption was turned on stays readable.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[MetadataEncoding]) != EncodingName {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, &UnknownKeyError{ID: id}
		}
		data := p.GetData()
		if len(data) < aead.NonceSize()+aead.Overhead() {
			return nil, &OpenError{ID: id, Reason: "too short to be sealed"}
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, &OpenError{ID: id, Reason: "authentication failed: the key with this ID is not the one that sealed it, or the payload was altered"}
		}
		var decoded commonpb.Payload
		if err := proto.Unmarshal(plain, &decoded); err != nil {
			return nil, &OpenError{ID: id, Reason: err.Error()}
		}
		out[i] = &decoded
	}
	return out, nil
}

// UnknownKeyError is a payload sealed with a key the codec does not have.
type UnknownKeyError struct{ ID string }

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("codec: payload sealed with key %q, which is not in the codec keys; add it back to the key file (after the key that encrypts): a key may leave only once no open workflow holds payloads it sealed", e.ID)
}

// OpenError is a sealed payload that does not open.
type OpenError struct{ ID, Reason string }

func (e *OpenError) Error() string {
	return fmt.Sprintf("codec: payload sealed with key %q does not open: %s", e.ID, e.Reason)
}

// DataConverter is the SDK's default converter with every payload going
// through c.
func DataConverter(c *Codec) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Apply makes a client encrypt with c: its payloads go through the codec,
// and so do failures' messages and stack traces (the stderr tail of a
// failed trainer among them), which the SDK otherwise keeps in the clear.
// A failure's type stays readable, since retry policies match on it.
func Apply(opts *client.Options, c *Codec) {
	dc := DataConverter(c)
	opts.DataConverter = dc
	opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: dc, EncodeCommonAttributes: true,
	})
}
