"""vulture's allow-list (pyproject.toml [tool.vulture]): names that look unused to it but
are public API, read by C through cffi, read by name, or called by a framework. Each group
says which. Dead code is deleted, not listed here."""
# ruff: noqa
# mypy: ignore-errors


# exon/__init__.py: module __getattr__: the lazy public names (PEP 562)
__getattr__

# exon/archive/__init__.py: module __getattr__: the lazy public names (PEP 562)
__getattr__

# exon/archive/codec.py: a module flag, whether checksums go through the direct native routine
# (it names what _bind_crc_routine() found at import)
DIRECT_CRC

# exon/archive/format.py: the record layout, declared whole (docs/protocol.md 3.2)
CHECKSUM_OFFSET
TIMESTAMP_OFFSET
META_LENGTH_OFFSET
VERSION_OFFSET
KEY_LENGTH_OFFSET
MAX_META_LENGTH

# exon/archive/recording.py: public statistics attribute of a RecordingWriter
_.records_written

# exon/bench/spark.py: pyspark's foreachBatch callback signature
batch_id

# exon/core/credits.py: read by name: the _shared descriptors of CreditLedger
_._confirmed
_._hold_flow
_._flow_timer
_._received
_._delivered
_._advertised
_._flowed_delivered

# exon/core/records.py: public fields of CoreStatistics (Node.statistics(), exon stat)
ignored
oversize_dropped
refusals_received
retries
links_closed
cookies_returned
cookies_lost

# exon/core/settings.py: pydantic's model configuration
model_config

# exon/middleware/fastpath.py: cffi struct fields, read by C (exon_link_table.c)
_.max_out
_.max_in

# exon/middleware/heap.py: public counter of HeapTrimmer
_.trims

# exon/native/build.py: cffi and setuptools read these: setup.py's cffi_modules and ext_modules, build_ext's fields
ffibuilder
archive_extension
_.build_temp
_.build_lib

# exon/sockets/inbox.py: the native receive queue's flag, read by C (exon_fast_inbox.c)
_.direct

# exon/sockets/pull.py: public: Socket.can_send
can_send

# exon/sockets/rep.py: public counter of RepSocket
_.replies_dropped

# exon/sockets/socket.py: public: Socket.can_send; the native queue's flag, read by C
can_send
_.direct

# exon/sockets/sub.py: public: Socket.can_send
can_send

# exon/spark/__init__.py: module __getattr__: the lazy public names (PEP 562)
__getattr__

# exon/spark/sink.py: pyspark's DataSourceStreamWriter signature
batchId

# exon/spark/source.py: pyspark's DataSource API (method and parameter names)
_.streamWriter
overwrite

# exon/transport/aeron/channel.py: fields of a parsed Aeron channel URI (public, Aeron's names)
rcv_wnd
pub_wnd
tether
rejoin

# exon/transport/aeron/cnc.py: the CnC layout, declared whole (Aeron's cnc.dat)
COUNTERS_VALUES
ERROR_LOG

# exon/transport/aeron/commands.py: Aeron's command types, declared whole
CORRELATED

# exon/transport/aeron/counters.py: Aeron's counter types and states, declared whole; a reference that keeps a cdata alive
STATE_UNUSED
SND_POS
SND_LMT
RCV_HWM
RCV_POS
_._keepalive

# exon/transport/aeron/driver.py: cffi struct fields of the driver context, read by C
_.nak_retry_delay_ns
_.retransmit_delay_ns
_.retransmit_linger_ns

# exon/transport/aeron/image.py: a reference that keeps a cdata alive
_._position_cell

# exon/transport/aeron/layout.py: Aeron's log buffer and frame layout, declared whole
HDR_TYPE_EXT
SM_FLAG_EOS
SETUP_FLAG_SEND_RESPONSE
ERR_FLAG_HAS_GROUP_TAG
VERSION_OFFSET
FLAGS_OFFSET
LOG_LAYOUT_VERSION
DOORBELL_SENDER
LOG_TYPE_EXCLUSIVE_PUBLICATION
LOG_TYPE_IMAGE
LOG_EXON_WAITERS_OFFSET
LOG_END_OF_STREAM_POSITION_OFFSET
LOG_IS_CONNECTED_OFFSET
LOG_ACTIVE_TRANSPORT_COUNT_OFFSET
LOG_EXON_DOORBELL_COUNT_OFFSET
LOG_EXON_DOORBELL_IDS_OFFSET
LOG_INITIAL_TERM_ID_OFFSET
LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET
LOG_RECEIVER_WINDOW_LENGTH_OFFSET
LOG_SOCKET_SNDBUF_LENGTH_OFFSET
LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET
LOG_OS_MAX_SOCKET_SNDBUF_LENGTH_OFFSET
LOG_SOCKET_RCVBUF_LENGTH_OFFSET
LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET
LOG_OS_MAX_SOCKET_RCVBUF_LENGTH_OFFSET
LOG_MAX_RESEND_OFFSET
LOG_ENTITY_TAG_OFFSET
LOG_RESPONSE_CORRELATION_ID_OFFSET
LOG_UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS_OFFSET
LOG_UNTETHERED_RESTING_TIMEOUT_NS_OFFSET
LOG_GROUP_OFFSET
LOG_IS_RESPONSE_OFFSET
LOG_REJOIN_OFFSET
LOG_RELIABLE_OFFSET
LOG_SPARSE_OFFSET
LOG_SIGNAL_EOS_OFFSET
LOG_SPIES_SIMULATE_CONNECTION_OFFSET
LOG_TETHER_OFFSET
LOG_IS_PUBLICATION_REVOKED_OFFSET
LOG_TYPE_OFFSET
LOG_UNTETHERED_LINGER_TIMEOUT_NS_OFFSET

# exon/transport/aeron/policies.py: the Python twin's state, field for field with its C struct
_.active_length

# exon/transport/aeron/publication.py: the __exit__ signature
tb

# exon/transport/aeron/settings.py: pydantic: model configuration; a DriverSettings field (public, Aeron's)
model_config
flow_control_receiver_timeout_ns

# tests/chaos/relay.py: the relay's counters, read through __slots__ (as_dict)
_.delayed
_.send_errors
_.kernel_drops

# tests/conftest.py: pytest hook signature
exitstatus

# tests/core/helpers.py: LossyWire's counters (dropped, duplicated, reordered), for a reader
_.reordered

# tests/middleware/test_credit_parity.py: cffi struct fields, read by C
_.max_out
_.max_in

# tests/middleware/test_link_table_index.py: cffi struct fields, read by C
_.max_in
_.max_out

# tests/native/test_inbox.py: cffi struct fields, read by C
_.max_in
_.max_out

# tests/transport/aeron/test_driver.py: a cffi struct field, read by C
_.sleeping_flag

# tools/mkdocs_hooks.py: mkdocs hook
on_pre_build

# exon/bench/zmq_worker.py: pyzmq socket options, set as attributes (CURVE for the peer)
_.curve_server
_.curve_secretkey
_.curve_publickey
_.curve_serverkey

# exon/crypto/seal.py: the cffi finalizer is kept alive by the reference (keys wiped at gc)
_._gc

# exon/ops/health.py: http.server's hooks and class settings
_.do_GET
_.log_message
daemon_threads
address_family

# exon/sockets/pub.py: a drop count read by name (Socket._drop_attributes, the metrics)
_._dropped_total

# exon/archive/replication.py: a MemberStatus field, served by asdict (exon archive list)
_.silent
