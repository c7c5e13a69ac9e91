//! What people use to operate jobsd: the web console's files and their routes ([`console`]).

pub mod console;
