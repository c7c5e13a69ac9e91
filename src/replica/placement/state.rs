//! `GET /placement/state` on the healthz port (`--placement-metadata-enabled`): the placement
//! tables as Dapr's placement writes them there (Go's `encoding/json` of its protobuf
//! structs: snake_case names, empty fields left out, the operation as its number).

use std::fmt::Write as _;

use crate::go::json::write_str;
use crate::proto::dapr_placement as pv1;

/// The JSON body of `GET /placement/state`.
pub fn state_json(state: &pv1::StatePlacementTables) -> String {
    let mut out = String::from("{");
    let mut names: Vec<&String> = state.tables.keys().collect();
    names.sort();
    if !names.is_empty() {
        out.push_str("\"tables\":{");
        for (i, ns) in names.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let table = &state.tables[ns];
            write_str(&mut out, ns);
            out.push_str(":{");
            let mut fields = Fields::new(&mut out);
            if !table.hosts.is_empty() {
                fields.name("hosts");
                fields.out.push('[');
                for (j, host) in table.hosts.iter().enumerate() {
                    if j > 0 {
                        fields.out.push(',');
                    }
                    host_json(fields.out, host);
                }
                fields.out.push(']');
            }
            if table.version != 0 {
                fields.name("version");
                let _ = write!(fields.out, "{}", table.version);
            }
            out.push('}');
        }
        out.push('}');
    }
    out.push('}');
    out
}

/// The fields of one JSON object, comma separated.
struct Fields<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Fields<'a> {
    fn new(out: &'a mut String) -> Self {
        Fields { out, first: true }
    }

    fn name(&mut self, name: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_str(self.out, name);
        self.out.push(':');
    }

    fn string(&mut self, name: &str, value: &str) {
        if !value.is_empty() {
            self.name(name);
            write_str(self.out, value);
        }
    }

    fn number(&mut self, name: &str, value: impl std::fmt::Display, zero: bool) {
        if !zero {
            self.name(name);
            let _ = write!(self.out, "{value}");
        }
    }
}

/// One host, in the field order of Dapr's `Host` struct.
#[allow(deprecated)]
fn host_json(out: &mut String, host: &pv1::Host) {
    out.push('{');
    let mut f = Fields::new(out);
    f.string("name", &host.name);
    f.number("port", host.port, host.port == 0);
    f.number("load", host.load, host.load == 0);
    if !host.entities.is_empty() {
        f.name("entities");
        f.out.push('[');
        for (i, e) in host.entities.iter().enumerate() {
            if i > 0 {
                f.out.push(',');
            }
            write_str(f.out, e);
        }
        f.out.push(']');
    }
    f.string("id", &host.id);
    f.string("pod", &host.pod);
    f.number("api_level", host.api_level, host.api_level == 0);
    f.string("namespace", &host.namespace);
    f.number("operation", host.operation, host.operation == 0);
    if let Some(v) = host.version {
        f.number("version", v, false);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_fields_are_left_out_as_go_does() {
        let mut state = pv1::StatePlacementTables::default();
        assert_eq!(state_json(&state), "{}");
        state.tables.insert(
            "default".into(),
            pv1::StatePlacementTable {
                hosts: vec![pv1::Host {
                    name: "127.0.0.1:5000".into(),
                    port: 5000,
                    entities: vec!["a".into()],
                    id: "app".into(),
                    namespace: "default".into(),
                    operation: 1,
                    ..Default::default()
                }],
                version: 3,
            },
        );
        assert_eq!(
            state_json(&state),
            r#"{"tables":{"default":{"hosts":[{"name":"127.0.0.1:5000","port":5000,"entities":["a"],"id":"app","namespace":"default","operation":1}],"version":3}}}"#
        );
    }
}
