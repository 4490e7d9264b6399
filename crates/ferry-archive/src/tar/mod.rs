//! Reading tar streams: headers, pax records, GNU extensions, sparse maps.
