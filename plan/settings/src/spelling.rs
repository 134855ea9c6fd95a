//! The one spelling of a setting's value: its command-line name, also the QNN EP's option value.

use clap::ValueEnum;

/// The clap spelling of a value-enum variant (which is also the QNN EP's spelling).
pub fn spelling<T: ValueEnum>(value: T) -> String {
    value.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
}

/// `Serialize` of a clap value enum as its command-line name, the one spelling of its values.
macro_rules! serialize_as_value_name {
    ($($ty:ty),*) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&crate::spelling::spelling(*self))
            }
        }
    )*};
}
pub(crate) use serialize_as_value_name;
