package llm

// Chunk is one streamed piece of a chat completion, already in the OpenAI
// chat.completion.chunk shape the client will see.
type Chunk struct {
	// Data is the chunk's JSON; valid until the next call to Stream.Next.
	Data []byte
	// Usage is set on the chunk that reported the call's token usage.
	Usage *Usage
	// UsageOnly marks the trailing usage chunk (empty choices) that the
	// gateway requested itself; it is withheld from clients that did not
	// ask for stream_options.include_usage.
	UsageOnly bool
	// UsageSlot locates Data's usage object for the gateway's cost when
	// the adapter found it while reading the usage (CheckChunk);
	// UsageSlot.End 0 when not known.
	UsageSlot UsageSlot
}

// Stream yields the chunks of a streamed completion. Next returns io.EOF
// after the last chunk (the gateway writes the closing [DONE] itself);
// any other error means the stream broke mid-way.
type Stream interface {
	Next() (Chunk, error)
	Close() error
}

// Pending is implemented by streams that can tell whether their next chunk
// is already buffered. The relay then writes the current chunk without a
// flush of its own and flushes after the next one: events that arrived
// together leave together, and none waits for the network.
type Pending interface {
	Pending() bool
}

// Completion is a finished, non-streamed response in OpenAI's shape.
type Completion struct {
	Body  []byte // the JSON the client receives
	Usage Usage
	// HasUsage is false when the upstream reported no usage at all.
	HasUsage bool
	// Slot locates Body's usage object for the gateway's cost, when the
	// adapter found it while reading the usage (CheckUsage); Slot.End 0
	// when not known. The cost goes there without walking the body again.
	Slot UsageSlot
}
