//! Where a model's settings came from, so a message about the model names what to change: the
//! environment variable the value was read from (`ANTLER_MODEL_API_KEY`, as the shipped config
//! does), else the key in the file (`models[0].api_key`).

/// The variables a model's settings were read from; filled in by the loader, empty for a
/// `ModelConfig` built in code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelSources {
    /// The model's position in `models[]`.
    pub index: Option<usize>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
}

/// A setting of a model that a message may tell the operator to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelSetting {
    /// The provider's model id (`model`).
    Model,
    BaseUrl,
    ApiKey,
}

impl ModelSetting {
    fn key(self) -> &'static str {
        match self {
            ModelSetting::Model => "model",
            ModelSetting::BaseUrl => "base_url",
            ModelSetting::ApiKey => "api_key",
        }
    }
}

impl ModelSources {
    /// What to set to change `setting` of the model named `name`: its variable, else its key.
    pub fn fix(&self, name: &str, setting: ModelSetting) -> String {
        let variable = match setting {
            ModelSetting::Model => &self.model,
            ModelSetting::BaseUrl => &self.base_url,
            ModelSetting::ApiKey => &self.api_key,
        };
        match (variable, self.index) {
            (Some(variable), _) => variable.clone(),
            (None, Some(index)) => format!("models[{index}].{}", setting.key()),
            (None, None) => format!("models[].{} of '{name}'", setting.key()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_is_named_else_the_key() {
        let sources = ModelSources {
            index: Some(1),
            api_key: Some("ANTLER_MODEL_API_KEY".into()),
            ..Default::default()
        };
        assert_eq!(
            sources.fix("main", ModelSetting::ApiKey),
            "ANTLER_MODEL_API_KEY"
        );
        assert_eq!(sources.fix("main", ModelSetting::Model), "models[1].model");
        assert_eq!(
            ModelSources::default().fix("main", ModelSetting::BaseUrl),
            "models[].base_url of 'main'"
        );
    }
}
